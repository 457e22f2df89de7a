"""Parsing and checking the options of the `moldau` Spark source and sink.

The option names and their meaning follow Spark's own Kafka source and sink, so a Kafka pipeline reads the
same against Moldau. Everything here is pure (no broker, no Spark session), so a malformed option fails at
`load()` with a message that names the option, before any query starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from moldau.spark.offsets import EARLIEST, LATEST, TopicPartition
from moldau.text import ascii_digits

SUBSCRIPTION_NAMES = {"subscribe": "subscribe", "subscribepattern": "subscribePattern", "assign": "assign"}
SUBSCRIPTION_OPTIONS = tuple(SUBSCRIPTION_NAMES)
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")

# Client settings the source or the sink must own: letting a user override them would break the offset
# bookkeeping (the source never commits, reads exact ranges) or the sink's transactions (one transactional id
# per query, and its commit records read committed only).
SOURCE_OWNED = ("auto.offset.reset", "enable.auto.commit", "key.deserializer", "value.deserializer",
                "interceptor.classes", "enable.partition.eof")
SINK_OWNED = ("key.serializer", "value.serializer", "interceptor.classes", "transactional.id", "isolation.level")

BoundKind = Literal["earliest", "latest", "offsets", "timestamps", "timestamp"]


class OptionError(ValueError):
    """An option is missing, malformed or conflicts with another; the message names the option."""


@dataclass(frozen=True)
class Subscription:
    """Which topic-partitions to read: named topics, a regex over topic names, or fixed partitions."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        """True if `topic` belongs to the subscription (for `assign`, if any of its partitions does)."""
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(tp.topic == topic for tp in self.assigned)


@dataclass(frozen=True)
class OffsetBound:
    """Where reading starts or ends, before it is resolved against the broker.

    `offsets` maps partitions to offsets (-2 earliest, -1 latest) for kind "offsets", or to timestamps in
    ms for kind "timestamps"; `timestamp` is the one timestamp of kind "timestamp" (all partitions).
    """

    kind: BoundKind
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int = 0


@dataclass(frozen=True)
class SourceOptions:
    """The checked options of a read (batch or streaming)."""

    bootstrap: str
    subscription: Subscription
    starting: OffsetBound | None
    ending: OffsetBound | None
    starting_timestamp_strategy: Literal["error", "latest"]
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    isolation_level: str
    poll_timeout_ms: int
    client_conf: Mapping[str, str]


@dataclass(frozen=True)
class SinkOptions:
    """The checked options of a write (batch or streaming)."""

    bootstrap: str
    topic: str | None
    commits_topic: str
    staging_topic: str
    client_conf: Mapping[str, str]


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Check every read option; raise OptionError naming the first bad one.

    Mode-specific rules (streaming forbids endingOffsets, batch forbids startingOffsets=latest) are checked
    by `check_batch` and `check_streaming`, because a load() does not yet know which it will be.
    """
    opts = _lower(options)
    bootstrap = _bootstrap(opts)
    level = opts.get("kafka.isolation.level", "read_uncommitted")
    if level not in ISOLATION_LEVELS:
        raise OptionError(f"kafka.isolation.level must be one of {', '.join(ISOLATION_LEVELS)}, not {level!r}")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"startingOffsetsByTimestampStrategy must be 'error' or 'latest', not {strategy!r}")
    return SourceOptions(
        bootstrap=bootstrap,
        subscription=parse_subscription(opts),
        starting=_bound(opts, "startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets"),
        ending=_bound(opts, "endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets"),
        starting_timestamp_strategy="error" if strategy == "error" else "latest",
        max_offsets_per_trigger=_positive_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(opts, "minpartitions", "minPartitions"),
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        isolation_level=level,
        poll_timeout_ms=_positive_int(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs") or 60_000,
        client_conf=_client_conf(opts, SOURCE_OWNED),
    )


def check_batch(options: SourceOptions) -> None:
    """Rules of a batch read: it cannot start at `latest` (it would read nothing) nor end at `earliest`."""
    if options.starting is not None and _names(options.starting, LATEST):
        raise OptionError("startingOffsets: 'latest' (or -1) is not allowed in a batch read")
    if options.ending is not None and _names(options.ending, EARLIEST):
        raise OptionError("endingOffsets: 'earliest' (or -2) is not allowed in a batch read")
    if options.max_offsets_per_trigger is not None:
        raise OptionError("maxOffsetsPerTrigger applies to streaming reads only")


def check_streaming(options: SourceOptions) -> None:
    """Rules of a streaming read: it has no end."""
    if options.ending is not None:
        raise OptionError("endingOffsets/endingOffsetsByTimestamp/endingTimestamp apply to batch reads only")


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Check every write option; raise OptionError naming the first bad one."""
    opts = _lower(options)
    idempotence = opts.get("kafka.enable.idempotence", "true").lower()
    if idempotence != "true":
        raise OptionError("kafka.enable.idempotence: the sink always uses the idempotent producer")
    topic = opts.get("topic") or None
    commits_topic = opts.get("sinkcommitstopic", "__moldau_spark_sink_commits")
    staging_topic = opts.get("sinkstagingtopic", "__moldau_spark_sink_staging")
    if not commits_topic or not staging_topic:
        raise OptionError("sinkCommitsTopic and sinkStagingTopic must not be empty")
    if commits_topic == staging_topic:
        raise OptionError("sinkCommitsTopic and sinkStagingTopic must be different topics")
    return SinkOptions(bootstrap=_bootstrap(opts), topic=topic, commits_topic=commits_topic,
                       staging_topic=staging_topic,
                       client_conf=_client_conf(opts, (*SINK_OWNED, "enable.idempotence")))


def parse_subscription(opts: Mapping[str, str]) -> Subscription:
    """Exactly one of subscribe (comma-separated topics), subscribePattern (regex) or assign (JSON)."""
    given = [name for name in SUBSCRIPTION_OPTIONS if opts.get(name, "").strip()]
    if len(given) != 1:
        names = ", ".join(SUBSCRIPTION_NAMES[g] for g in given)
        what = "none was given" if not given else f"got {names}"
        raise OptionError(f"exactly one of subscribe, subscribePattern or assign is required; {what}")
    value = opts[given[0]].strip()
    if given[0] == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError("subscribe: no topic names")
        return Subscription("subscribe", topics=topics)
    if given[0] == "subscribepattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(f"subscribePattern: not a valid regular expression: {exc}") from None
        return Subscription("subscribePattern", pattern=value)
    return Subscription("assign", assigned=_assignment(value))


def _assignment(text: str) -> tuple[TopicPartition, ...]:
    """`{"topicA":[0,1],"topicB":[2]}` → the listed topic-partitions."""
    data = _json_object("assign", text)
    out: list[TopicPartition] = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and p >= 0 for p in parts):
            raise OptionError(f"assign: topic {topic!r} needs a list of partition numbers, got {parts!r}")
        out.extend(TopicPartition(topic, p) for p in parts)
    if not out:
        raise OptionError("assign: no partitions")
    return tuple(out)


def _bound(opts: Mapping[str, str], timestamp_name: str, by_ts_name: str, offsets_name: str) -> OffsetBound | None:
    """The bound from the three ways of giving it; like Spark, a global timestamp wins over per-partition
    timestamps, which win over offsets."""
    if opts.get(timestamp_name.lower(), "").strip():
        return OffsetBound("timestamp", timestamp=_timestamp(timestamp_name, opts[timestamp_name.lower()]))
    if opts.get(by_ts_name.lower(), "").strip():
        return OffsetBound("timestamps", offsets=_partition_map(by_ts_name, opts[by_ts_name.lower()], minimum=0))
    text = opts.get(offsets_name.lower(), "").strip()
    if not text:
        return None
    if text.lower() == "earliest":
        return OffsetBound("earliest")
    if text.lower() == "latest":
        return OffsetBound("latest")
    return OffsetBound("offsets", offsets=_partition_map(offsets_name, text, minimum=EARLIEST))


def _partition_map(name: str, text: str, minimum: int) -> dict[TopicPartition, int]:
    """`{"topic":{"0":23,"1":-2}}` → {TopicPartition: number}; numbers below `minimum` are refused."""
    out: dict[TopicPartition, int] = {}
    for topic, parts in _json_object(name, text).items():
        if not isinstance(parts, dict):
            raise OptionError(f"{name}: topic {topic!r} needs an object of partition → number, got {parts!r}")
        for part, value in parts.items():
            if not ascii_digits(part) or not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise OptionError(f"{name}: bad entry {part!r}: {value!r} for topic {topic!r}")
            out[TopicPartition(topic, int(part))] = value
    if not out:
        raise OptionError(f"{name}: no partitions")
    return out


def _json_object(name: str, text: str) -> dict[str, object]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"{name}: malformed JSON ({exc.msg} at position {exc.pos}): {text!r}") from None
    if not isinstance(data, dict):
        raise OptionError(f"{name}: expected a JSON object, got {text!r}")
    return data


def _names(bound: OffsetBound, special: int) -> bool:
    """True if the bound is, or contains, the special offset `special` (EARLIEST or LATEST)."""
    kind = "latest" if special == LATEST else "earliest"
    return bound.kind == kind or (bound.kind == "offsets" and special in bound.offsets.values())


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    # Spark hands over options case-insensitively; lower-casing once keeps every lookup simple.
    return {str(k).lower(): str(v) for k, v in options.items()}


def _bootstrap(opts: Mapping[str, str]) -> str:
    value = opts.get("kafka.bootstrap.servers", "").strip()
    if not value:
        raise OptionError("kafka.bootstrap.servers is required (host:port[,host:port...])")
    return value


def _client_conf(opts: Mapping[str, str], owned: tuple[str, ...]) -> dict[str, str]:
    """The `kafka.*` options without their prefix, for the client library; refuses the ones we own."""
    conf: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        name = key[len("kafka."):]
        if name in owned:
            raise OptionError(f"kafka.{name} cannot be set: the Moldau data source manages it")
        conf[name] = value
    return conf


def _positive_int(opts: Mapping[str, str], key: str, name: str) -> int | None:
    text = opts.get(key, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"{name} must be a positive integer, not {text!r}") from None
    if value <= 0:
        raise OptionError(f"{name} must be a positive integer, not {text!r}")
    return value


def _timestamp(name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(f"{name} must be a timestamp in milliseconds, not {text!r}") from None
    if value < 0:
        raise OptionError(f"{name} must not be negative")
    return value


def _bool(opts: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    text = opts.get(key, "").strip().lower()
    if not text:
        return default
    if text not in ("true", "false"):
        raise OptionError(f"{name} must be true or false, not {text!r}")
    return text == "true"
