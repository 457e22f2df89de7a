"""Broker and topic configuration, named, typed and validated as in Apache Kafka.

Static broker settings come from a Kafka-style ``server.properties`` file and ``--override key=value``
flags: flags win over the file, the file over built-in defaults. Dynamic settings (IncrementalAlterConfigs)
are layered on top, a per-broker value over a cluster-wide default. Topic configs have their own table;
a topic without an override takes its value from the broker config Kafka documents as its "server default
property" (``retention.ms`` from ``log.retention.ms|minutes|hours``, and so on).

Values are parsed the way Kafka's ``ConfigDef`` parses them (trimmed, case-insensitive booleans,
comma-separated lists) and invalid ones are reported in Kafka's words, e.g. ``Invalid value abc for
configuration log.segment.bytes: Not a number of type INT``.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple, TypeAlias

from moldau.storage.log_config import LogConfig, TimestampType

__all__ = [
    "BROKER_CONFIGS",
    "LONG_MAX",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigEntryView",
    "ConfigError",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "ConfigValue",
    "Custom",
    "ListOf",
    "Listener",
    "OneOf",
    "Range",
    "Synonym",
    "TopicConfigDef",
    "Validator",
    "Voter",
    "describe_broker_configs",
    "dynamic_broker_config_names",
    "effective_topic_configs",
    "load_properties",
    "log_config",
    "parse_listener",
    "parse_overrides",
    "parse_properties",
    "parse_voter",
    "validate_dynamic_broker_configs",
    "validate_topic_configs",
]

logger = logging.getLogger("moldau.config")

LONG_MAX = 2**63 - 1

# A parsed value: bool, int (INT, SHORT, LONG), float (DOUBLE), str (STRING, CLASS, PASSWORD),
# tuple of str (LIST), or None for a config without a value.
ConfigValue: TypeAlias = bool | int | float | str | tuple[str, ...] | None


# Accepted (so Kafka configs carry over unchanged) but not acted on yet, because the feature behind them does
# not exist yet (TLS/SASL, broker-side recompression, preallocation, roll jitter, down-conversion) or does not
# apply (thread pools: one event loop serves everything). The broker warns when one is set;
# docs/configuration.md marks them. Shrink this set as the features land.
NOT_YET_ACTED_ON: frozenset[str] = frozenset({
    # broker
    "compression.type", "listener.security.protocol.map", "log.flush.scheduler.interval.ms",
    "log.message.downconversion.enable", "log.preallocate", "log.roll.jitter.hours", "log.roll.jitter.ms",
    "num.io.threads", "num.network.threads", "ssl.keystore.password",
    # topic
    "message.downconversion.enable", "preallocate", "segment.jitter.ms",
})

class ConfigError(ValueError):
    """A configuration is unknown where that is not allowed, has an invalid value, or is read-only."""

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


class ConfigType(IntEnum):
    """Kafka's ConfigType numbers, as sent in DescribeConfigs responses."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Kafka's ConfigSource numbers: where a value in a DescribeConfigs response comes from."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


# Layers of explicitly set broker values, highest precedence first.
_BROKER_LAYERS = (
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG,
)


# --- value parsing ----------------------------------------------------------------------------------


class _Invalid(Exception):
    """Why a value was rejected; turned into a ConfigError naming the config and the value."""


_INTEGER_RE = re.compile(r"[+-]?[0-9]+\Z")
_DOUBLE_RE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_INTEGER_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}


def _parse_integer(config_type: ConfigType, text: str) -> int:
    # Stricter than int(): no underscores or non-ASCII digits, and bounded like the Java type.
    bits = _INTEGER_BITS[config_type]
    if not _INTEGER_RE.match(text) or not -(2 ** (bits - 1)) <= int(text) < 2 ** (bits - 1):
        raise _Invalid(f"Not a number of type {config_type.name}")
    return int(text)


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise _Invalid("Expected value to be either true or false")
    return lowered == "true"


def _parse_double(text: str) -> float:
    if not _DOUBLE_RE.match(text):
        raise _Invalid("Not a number of type DOUBLE")
    return float(text)


def _parse_list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",")) if text else ()


def _parse_typed(config_type: ConfigType, raw: str) -> ConfigValue:
    """Parse a raw string as ``config_type``; surrounding whitespace is ignored, as in Kafka."""
    text = raw.strip()
    if config_type in _INTEGER_BITS:
        return _parse_integer(config_type, text)
    if config_type is ConfigType.BOOLEAN:
        return _parse_bool(text)
    if config_type is ConfigType.DOUBLE:
        return _parse_double(text)
    if config_type is ConfigType.LIST:
        return _parse_list(text)
    return text


def _format(value: ConfigValue) -> str | None:
    """The string form of a parsed value, as DescribeConfigs reports it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


# --- validators -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Range:
    """A number within [low, high]; either bound may be open. None (no value) always passes."""

    low: int | float | None = None
    high: int | float | None = None

    def check(self, value: ConfigValue) -> str | None:
        """Return why ``value`` is invalid, or None if it is valid."""
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None
        if self.low is not None and value < self.low:
            return f"Value must be at least {self.low}"
        if self.high is not None and value > self.high:
            return f"Value must be no more than {self.high}"
        return None

    def describe(self) -> str:
        """The allowed values in Kafka's documentation notation."""
        low = "..." if self.low is None else str(self.low)
        return f"[{low},...]" if self.high is None else f"[{low},...,{self.high}]"


def at_least(low: int) -> Range:
    return Range(low=low)


@dataclass(frozen=True, slots=True)
class OneOf:
    """A string that is one of ``choices`` (case-sensitive, as Kafka's ValidString)."""

    choices: tuple[str, ...]

    def check(self, value: ConfigValue) -> str | None:
        """Return why ``value`` is invalid, or None if it is valid."""
        if isinstance(value, str) and value not in self.choices:
            return f"String must be one of: {', '.join(self.choices)}"
        return None

    def describe(self) -> str:
        """The allowed values in Kafka's documentation notation."""
        return f"[{', '.join(self.choices)}]"


@dataclass(frozen=True, slots=True)
class ListOf:
    """A non-empty list whose items are all in ``choices``."""

    choices: tuple[str, ...]

    def check(self, value: ConfigValue) -> str | None:
        """Return why ``value`` is invalid, or None if it is valid."""
        if not isinstance(value, tuple):
            return None
        if not value:
            return "Empty list is not allowed"
        if any(item not in self.choices for item in value):
            return f"String must be one of: {', '.join(self.choices)}"
        return None

    def describe(self) -> str:
        """The allowed values in Kafka's documentation notation."""
        return f"[{', '.join(self.choices)}]"


@dataclass(frozen=True, slots=True)
class Custom:
    """A validator defined by a function returning the reason a value is invalid, or None."""

    func: Callable[[ConfigValue], str | None]
    text: str

    def check(self, value: ConfigValue) -> str | None:
        """Return why ``value`` is invalid, or None if it is valid."""
        return self.func(value)

    def describe(self) -> str:
        """The allowed values, in words."""
        return self.text


Validator: TypeAlias = Range | OneOf | ListOf | Custom


# --- listeners and quorum voters ---------------------------------------------------------------------


class Listener(NamedTuple):
    """A parsed ``NAME://host:port`` entry; an empty host means all interfaces."""

    name: str
    host: str
    port: int


class Voter(NamedTuple):
    """A parsed ``id@host:port`` entry of ``controller.quorum.voters``."""

    node_id: int
    host: str
    port: int


# A host is a bracketed IPv6 address or a name/IPv4 address without colons; it may be empty.
_HOST = r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^:\[\]/\s@]*)"
_LISTENER_RE = re.compile(r"(?P<name>[A-Za-z0-9_.\-]+)://" + _HOST + r":(?P<port>[0-9]{1,5})\Z")
_VOTER_RE = re.compile(r"(?P<id>[0-9]+)@" + _HOST + r":(?P<port>[0-9]{1,5})\Z")
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _host_port(match: re.Match[str], text: str) -> tuple[str, int]:
    port = int(match["port"])
    if port > 65535:
        raise ValueError(f"port {port} in {text} is not in 0..65535")
    return match["host"].removeprefix("[").removesuffix("]"), port


def parse_listener(text: str) -> Listener:
    """Parse ``NAME://host:port``; the name is upper-cased as Kafka does. Raises ValueError."""
    match = _LISTENER_RE.match(text.strip())
    if match is None:
        raise ValueError(f"Unable to parse {text} to a listener; expected NAME://host:port")
    host, port = _host_port(match, text)
    return Listener(match["name"].upper(), host, port)


def parse_voter(text: str) -> Voter:
    """Parse ``id@host:port``. Raises ValueError."""
    match = _VOTER_RE.match(text.strip())
    if match is None or not match["host"]:
        raise ValueError(f"Unable to parse {text} to a quorum voter; expected id@host:port")
    host, port = _host_port(match, text)
    return Voter(int(match["id"]), host, port)


def _check_listeners(value: ConfigValue) -> str | None:
    if not isinstance(value, tuple):
        return None
    try:
        listeners = [parse_listener(item) for item in value]
    except ValueError as error:
        return str(error)
    names = [listener.name for listener in listeners]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        return f"Each listener must have a different name, found duplicates: {', '.join(duplicates)}"
    return None


def _check_voters(value: ConfigValue) -> str | None:
    if not isinstance(value, tuple):
        return None
    try:
        for item in value:
            parse_voter(item)
    except ValueError as error:
        return str(error)
    return None


def _parse_protocol_map(items: Iterable[str]) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in items:
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in _SECURITY_PROTOCOLS:
            raise ValueError(f"Expected NAME:PROTOCOL with PROTOCOL one of {', '.join(_SECURITY_PROTOCOLS)}")
        if name in result:
            raise ValueError(f"Listener name {name} is mapped more than once")
        result[name] = protocol
    return result


def _check_protocol_map(value: ConfigValue) -> str | None:
    if not isinstance(value, tuple):
        return None
    try:
        _parse_protocol_map(value)
    except ValueError as error:
        return str(error)
    return None


def _check_roles(value: ConfigValue) -> str | None:
    if isinstance(value, tuple) and len(set(value)) != len(value):
        return "Each role may be listed only once"
    return ListOf(("broker", "controller")).check(value)


def _check_paths(value: ConfigValue) -> str | None:
    if isinstance(value, tuple) and (not value or not all(value)):
        return "Expected a comma-separated list of non-empty paths"
    return None


def _check_non_empty(value: ConfigValue) -> str | None:
    return "Expected a non-empty string" if value == "" else None


_LISTENERS = Custom(_check_listeners, "a comma-separated list of NAME://host:port")
_VOTERS = Custom(_check_voters, "a comma-separated list of id@host:port")
_PROTOCOL_MAP = Custom(_check_protocol_map, "a comma-separated list of NAME:SECURITY_PROTOCOL")
_ROLES = Custom(_check_roles, "[broker, controller]")
_PATHS = Custom(_check_paths, "a comma-separated list of paths")
_NON_EMPTY = Custom(_check_non_empty, "a non-empty string")
_TIMESTAMP_TYPES = OneOf(("CreateTime", "LogAppendTime"))
_CLEANUP_POLICIES = ListOf(("compact", "delete"))
_COMPRESSION_TYPES = OneOf(("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))


# --- broker config table ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One known broker config.

    ``default`` is the raw string default (None: no value). ``dynamic`` configs may be changed at runtime;
    the others are read-only. ``topic_config`` names the topic config this one provides the default for.
    """

    name: str
    type: ConfigType
    default: str | None
    doc: str
    validator: Validator | None = None
    dynamic: bool = False
    topic_config: str | None = None

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: str) -> ConfigValue:
        """Parse and validate ``raw``; raise ConfigError naming this config, the value and what is allowed."""
        return _parse_checked(self.name, self.type, self.validator, raw)


def _parse_checked(name: str, config_type: ConfigType, validator: Validator | None, raw: str) -> ConfigValue:
    try:
        value = _parse_typed(config_type, raw)
        reason = validator.check(value) if validator is not None else None
    except _Invalid as error:
        reason = str(error)
    if reason is not None:
        # Never echo a password back, not even an invalid one.
        shown = "[hidden]" if config_type is ConfigType.PASSWORD else raw.strip()
        raise ConfigError(f"Invalid value {shown} for configuration {name}: {reason}", name)
    return value


_T = ConfigType
_LONG_MAX = str(LONG_MAX)
_UNUSED = " Accepted for compatibility with Kafka configuration files; not used."


def _log(name: str, type_: ConfigType, default: str | None, topic: str | None, doc: str,
         validator: Validator | None = None, dynamic: bool = True) -> ConfigDef:
    """A broker default for a topic config; dynamically alterable unless said otherwise."""
    return ConfigDef(name, type_, default, doc, validator, dynamic, topic)


_BROKER_DEFS: tuple[ConfigDef, ...] = (
    # Identity and roles.
    ConfigDef("node.id", _T.INT, "1", "The id of this node in the cluster.", at_least(0)),
    ConfigDef("process.roles", _T.LIST, "broker,controller",
              "The roles this node plays: broker, controller or both.", _ROLES),
    ConfigDef("cluster.id", _T.STRING, None,
              "The cluster id to format new log directories with; generated when unset."),
    ConfigDef("broker.rack", _T.STRING, None, "The rack of this broker, reported to rack-aware clients."),
    # Network.
    ConfigDef("listeners", _T.LIST, "PLAINTEXT://127.0.0.1:9092",
              "Addresses to listen on, as NAME://host:port; an empty host means all interfaces.", _LISTENERS),
    ConfigDef("advertised.listeners", _T.LIST, None,
              "Addresses given to clients, as NAME://host:port; defaults to listeners.", _LISTENERS),
    ConfigDef("listener.security.protocol.map", _T.LIST,
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
              "The security protocol of each listener name, as NAME:PROTOCOL.", _PROTOCOL_MAP),
    ConfigDef("inter.broker.listener.name", _T.STRING, None,
              "The listener followers use to fetch from leaders; defaults to the first non-controller listener."),
    ConfigDef("controller.listener.names", _T.LIST, "",
              "Listener names used by the controller; they default to PLAINTEXT when not mapped."),
    ConfigDef("controller.quorum.voters", _T.LIST, "",
              "The controller quorum, as id@host:port entries; empty for a single combined node.", _VOTERS),
    # The metadata quorum and broker liveness.
    ConfigDef("controller.quorum.election.timeout.ms", _T.INT, "1000",
              "How long a voter waits without hearing from a leader before it tries to become one; the actual "
              "timeout is drawn between this and twice this.", at_least(10)),
    ConfigDef("controller.quorum.fetch.timeout.ms", _T.INT, "2000",
              "How long a quorum leader keeps leading without fetches from a majority of the voters.",
              at_least(10)),
    ConfigDef("controller.quorum.fetch.interval.ms", _T.INT, "25",
              "How often a follower of the metadata quorum fetches from the leader (a Moldau setting; the fetch "
              "is also the follower's heartbeat).", at_least(1)),
    ConfigDef("broker.heartbeat.interval.ms", _T.INT, "2000",
              "How often a broker heartbeats to the active controller.", at_least(1)),
    ConfigDef("broker.session.timeout.ms", _T.INT, "9000",
              "How long the active controller waits without a heartbeat before it fences a broker and moves "
              "its leaderships.", at_least(1)),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", _T.LONG, "20971520",
              "How many bytes of metadata records accumulate before a node snapshots its metadata image and "
              "deletes the log below it.", at_least(1)),
    ConfigDef("controlled.shutdown.enable", _T.BOOLEAN, "true",
              "Whether a broker that stops asks the controller to move its leaderships away first."),
    ConfigDef("socket.request.max.bytes", _T.INT, "104857600",
              "The largest request the server accepts.", at_least(1)),
    ConfigDef("queued.max.requests", _T.INT, "500",
              "Requests a connection may have queued before the server stops reading from it.", at_least(1)),
    ConfigDef("queued.max.request.bytes", _T.LONG, "268435456",
              "The bytes all connections together may hold for requests (partial and queued frames); while over "
              "it, connections stop reading. -1 is unbounded (Kafka's default); Moldau bounds it by default so "
              "that clients cannot push the broker's memory, and never below socket.request.max.bytes.",
              at_least(-1)),
    ConfigDef("connections.max.idle.ms", _T.LONG, "600000",
              "Connections with no traffic for this long are closed; -1 never closes them.", at_least(-1)),
    ConfigDef("socket.request.read.timeout.ms", _T.LONG, "60000",
              "A connection that started sending a request and did not complete it within this time is closed, "
              "so stalled or trickling senders cannot hold memory; -1 disables it. Moldau's own setting.",
              at_least(-1)),
    ConfigDef("num.network.threads", _T.INT, "3", "Threads for network requests." + _UNUSED, at_least(1)),
    ConfigDef("num.io.threads", _T.INT, "8", "Threads for request processing." + _UNUSED, at_least(1)),
    ConfigDef("ssl.keystore.password", _T.PASSWORD, None, "The password of the key store." + _UNUSED),
    # Topics.
    ConfigDef("num.partitions", _T.INT, "1", "The default number of partitions of a new topic.",
              at_least(1), dynamic=True),
    ConfigDef("default.replication.factor", _T.INT, "1",
              "The default replication factor of a new topic.", at_least(1)),
    ConfigDef("auto.create.topics.enable", _T.BOOLEAN, "true",
              "Create a topic when a client asks for metadata of a topic that does not exist."),
    ConfigDef("delete.topic.enable", _T.BOOLEAN, "true", "Allow topics to be deleted."),
    # Log storage.
    ConfigDef("log.dir", _T.STRING, "./data", "The data directory, used when log.dirs is not set.",
              _NON_EMPTY),
    ConfigDef("log.dirs", _T.LIST, None, "Comma-separated data directories; overrides log.dir.", _PATHS),
    _log("log.retention.ms", _T.LONG, None, "retention.ms",
         "How long to keep a log segment before deleting it; -1 means no limit. Wins over "
         "log.retention.minutes and log.retention.hours.", at_least(-1)),
    _log("log.retention.minutes", _T.INT, None, "retention.ms",
         "Retention in minutes, used when log.retention.ms is not set.", at_least(-1), dynamic=False),
    _log("log.retention.hours", _T.INT, "168", "retention.ms",
         "Retention in hours, used when neither log.retention.ms nor log.retention.minutes is set.",
         at_least(-1), dynamic=False),
    _log("log.retention.bytes", _T.LONG, "-1", "retention.bytes",
         "The size a partition's log may reach before old segments are deleted; -1 means no limit."),
    _log("log.segment.bytes", _T.INT, "1073741824", "segment.bytes",
         "The largest size of a single log segment.", at_least(14)),
    _log("log.roll.ms", _T.LONG, None, "segment.ms",
         "The time after which a new segment is rolled; wins over log.roll.hours.", at_least(1)),
    _log("log.roll.hours", _T.INT, "168", "segment.ms",
         "The time in hours after which a new segment is rolled.", at_least(1), dynamic=False),
    _log("log.roll.jitter.ms", _T.LONG, None, "segment.jitter.ms",
         "The largest random jitter subtracted from the roll time; wins over log.roll.jitter.hours.",
         at_least(0)),
    _log("log.roll.jitter.hours", _T.INT, "0", "segment.jitter.ms",
         "The largest roll jitter in hours.", at_least(0), dynamic=False),
    _log("log.index.interval.bytes", _T.INT, "4096", "index.interval.bytes",
         "Bytes of log between two offset index entries.", at_least(0)),
    _log("log.index.size.max.bytes", _T.INT, "10485760", "segment.index.bytes",
         "The largest size of an offset index file.", at_least(4)),
    _log("log.flush.interval.messages", _T.LONG, _LONG_MAX, "flush.messages",
         "Messages appended to a partition before its log is flushed to disk.", at_least(1)),
    _log("log.flush.interval.ms", _T.LONG, None, "flush.ms",
         "Time a message may stay unflushed; log.flush.scheduler.interval.ms when unset.", at_least(0)),
    _log("log.flush.scheduler.interval.ms", _T.LONG, _LONG_MAX, "flush.ms",
         "How often logs are checked for flushing.", at_least(0), dynamic=False),
    ConfigDef("log.retention.check.interval.ms", _T.LONG, "300000",
              "How often logs are checked for segments to delete.", at_least(1)),
    _log("log.message.timestamp.type", _T.STRING, "CreateTime", "message.timestamp.type",
         "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).",
         _TIMESTAMP_TYPES),
    _log("log.message.timestamp.before.max.ms", _T.LONG, _LONG_MAX, "message.timestamp.before.max.ms",
         "How far a CreateTime timestamp may lie before the broker's clock.", at_least(0)),
    _log("log.message.timestamp.after.max.ms", _T.LONG, "3600000", "message.timestamp.after.max.ms",
         "How far a CreateTime timestamp may lie after the broker's clock.", at_least(0)),
    _log("log.cleanup.policy", _T.LIST, "delete", "cleanup.policy",
         "What to do with old segments: delete, compact, or both.", _CLEANUP_POLICIES),
    _log("log.cleaner.delete.retention.ms", _T.LONG, "86400000", "delete.retention.ms",
         "How long tombstones are kept in compacted topics.", at_least(0)),
    _log("log.cleaner.min.compaction.lag.ms", _T.LONG, "0", "min.compaction.lag.ms",
         "The least time a record stays uncompacted.", at_least(0)),
    _log("log.cleaner.max.compaction.lag.ms", _T.LONG, _LONG_MAX, "max.compaction.lag.ms",
         "The most time a record stays uncompacted.", at_least(1)),
    _log("log.cleaner.min.cleanable.ratio", _T.DOUBLE, "0.5", "min.cleanable.dirty.ratio",
         "The share of dirty log that makes a log eligible for cleaning.", Range(0, 1)),
    ConfigDef("log.cleaner.dedupe.buffer.size", _T.LONG, "134217728",
              "Memory for the log cleaner's key-to-offset map, in bytes.", at_least(1024 * 1024)),
    _log("log.segment.delete.delay.ms", _T.LONG, "60000", "file.delete.delay.ms",
         "How long a deleted segment's files stay on disk.", at_least(0)),
    _log("log.preallocate", _T.BOOLEAN, "false", "preallocate",
         "Preallocate segment files on creation."),
    _log("log.message.downconversion.enable", _T.BOOLEAN, "true", "message.downconversion.enable",
         "Convert records to older formats for old consumers."),
    _log("compression.type", _T.STRING, "producer", "compression.type",
         "The compression of stored records; producer keeps the producer's codec.", _COMPRESSION_TYPES),
    _log("message.max.bytes", _T.INT, "1048588", "max.message.bytes",
         "The largest record batch the server accepts.", at_least(0)),
    # Replication.
    _log("min.insync.replicas", _T.INT, "1", "min.insync.replicas",
         "Replicas that must acknowledge an acks=all write.", at_least(1)),
    _log("unclean.leader.election.enable", _T.BOOLEAN, "false", "unclean.leader.election.enable",
         "Allow an out-of-sync replica to become leader, at the risk of losing data."),
    ConfigDef("replica.lag.time.max.ms", _T.LONG, "30000",
              "A follower that has not caught up with its leader for this long leaves the ISR.", at_least(1)),
    ConfigDef("replica.fetch.wait.max.ms", _T.INT, "500",
              "How long a follower's fetch waits at the leader for new records.", at_least(0)),
    ConfigDef("replica.fetch.min.bytes", _T.INT, "1",
              "The bytes a follower's fetch waits for at the leader.", at_least(1)),
    ConfigDef("replica.fetch.max.bytes", _T.INT, "1048576",
              "The bytes a follower fetches per partition (at least one batch).", at_least(0)),
    ConfigDef("replica.fetch.response.max.bytes", _T.INT, "10485760",
              "The bytes a follower fetches per request (at least one batch).", at_least(0)),
    ConfigDef("replica.fetch.backoff.ms", _T.INT, "1000",
              "How long a follower waits after a failed fetch.", at_least(0)),
    ConfigDef("replica.socket.timeout.ms", _T.INT, "30000",
              "How long a follower waits for a fetch answer beyond the leader's wait.", at_least(1)),
    ConfigDef("auto.leader.rebalance.enable", _T.BOOLEAN, "true",
              "Move leadership back to preferred replicas when brokers are imbalanced."),
    ConfigDef("leader.imbalance.check.interval.seconds", _T.LONG, "300",
              "How often the controller checks leader balance.", at_least(1)),
    ConfigDef("leader.imbalance.per.broker.percentage", _T.INT, "10",
              "The share of a broker's preferred leaderships held elsewhere that triggers a rebalance.",
              at_least(0)),
    # Consumer groups and transactions.
    ConfigDef("offsets.topic.num.partitions", _T.INT, "50",
              "Partitions of the committed offsets topic.", at_least(1)),
    ConfigDef("offsets.topic.replication.factor", _T.SHORT, "3",
              "Replication factor of the committed offsets topic; capped at the number of registered brokers "
              "when it is created.", at_least(1)),
    ConfigDef("offsets.commit.timeout.ms", _T.INT, "5000",
              "How long an offset commit waits to be on every in-sync replica of the offsets topic.", at_least(1)),
    ConfigDef("offsets.retention.minutes", _T.INT, "10080",
              "How long committed offsets of an empty group are kept.", at_least(1)),
    ConfigDef("group.initial.rebalance.delay.ms", _T.INT, "3000",
              "How long a new group waits for more members before its first rebalance.", at_least(0)),
    ConfigDef("group.min.session.timeout.ms", _T.INT, "6000",
              "The shortest session timeout a consumer may ask for.", at_least(0)),
    ConfigDef("group.max.session.timeout.ms", _T.INT, "1800000",
              "The longest session timeout a consumer may ask for.", at_least(0)),
    ConfigDef("group.max.size", _T.INT, "2147483647",
              "The most members a consumer group may have.", at_least(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", _T.INT, "5000",
              "How often members of consumer (KIP-848) groups are asked to heartbeat.", at_least(1)),
    ConfigDef("group.consumer.session.timeout.ms", _T.INT, "45000",
              "How long a member of a consumer (KIP-848) group may go without a heartbeat before it is "
              "removed.", at_least(1)),
    ConfigDef("group.consumer.assignors", _T.LIST, "uniform,range",
              "The server-side assignors of consumer (KIP-848) groups; the first is the default.",
              ListOf(("uniform", "range"))),
    ConfigDef("group.consumer.max.size", _T.INT, "2147483647",
              "The most members a consumer (KIP-848) group may have.", at_least(1)),
    ConfigDef("offset.metadata.max.bytes", _T.INT, "4096",
              "The largest metadata string a committed offset may carry.", at_least(0)),
    ConfigDef("offsets.retention.check.interval.ms", _T.LONG, "600000",
              "How often committed offsets are checked for expiry.", at_least(1)),
    ConfigDef("transactional.id.expiration.ms", _T.INT, "604800000",
              "How long an idle transactional id is kept.", at_least(1)),
    ConfigDef("transaction.max.timeout.ms", _T.INT, "900000",
              "The longest transaction timeout a producer may ask for.", at_least(1)),
    ConfigDef("transaction.state.log.num.partitions", _T.INT, "50",
              "Partitions of the transaction state topic.", at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", _T.SHORT, "3",
              "Replication factor of the transaction state topic; capped at the number of registered brokers "
              "when it is created.", at_least(1)),
    ConfigDef("transaction.state.log.min.isr", _T.INT, "2",
              "min.insync.replicas of the transaction state topic; capped at its replication factor.", at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", _T.INT, "104857600",
              "Segment size of the transaction state topic.", at_least(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", _T.INT, "10000",
              "How often the transaction coordinator aborts transactions that outlived their timeout.",
              at_least(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", _T.INT, "3600000",
              "How often the transaction coordinator forgets transactional ids idle for "
              "transactional.id.expiration.ms.", at_least(1)),
    ConfigDef("transaction.partition.verification.enable", _T.BOOLEAN, "true",
              "Before the first transactional write to a partition, ask the transaction coordinator whether the "
              "partition is in the producer's transaction (KIP-890), so a late write cannot join a finished one."),
    ConfigDef("producer.id.expiration.ms", _T.INT, "86400000",
              "How long an idle producer id's state is kept.", at_least(1)),
)

BROKER_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in _BROKER_DEFS}


def dynamic_broker_config_names() -> frozenset[str]:
    """The broker configs that may be changed at runtime; all others are read-only."""
    return frozenset(name for name, d in BROKER_CONFIGS.items() if d.dynamic)


# --- topic config table -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker config providing a topic default, with the milliseconds per unit of its value."""

    name: str
    unit_ms: int = 1


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """One known topic config; its default is the first set broker config among ``synonyms``."""

    name: str
    type: ConfigType
    doc: str
    synonyms: tuple[Synonym, ...]
    validator: Validator | None = None

    def parse(self, raw: str) -> ConfigValue:
        """Parse and validate ``raw``; raise ConfigError naming this config, the value and what is allowed."""
        return _parse_checked(self.name, self.type, self.validator, raw)


def _syn(*names: str) -> tuple[Synonym, ...]:
    return tuple(Synonym(name) for name in names)


_RETENTION = (Synonym("log.retention.ms"), Synonym("log.retention.minutes", 60_000),
              Synonym("log.retention.hours", 3_600_000))
_ROLL = (Synonym("log.roll.ms"), Synonym("log.roll.hours", 3_600_000))
_ROLL_JITTER = (Synonym("log.roll.jitter.ms"), Synonym("log.roll.jitter.hours", 3_600_000))
_FLUSH_MS = _syn("log.flush.interval.ms", "log.flush.scheduler.interval.ms")

_TOPIC_DEFS: tuple[TopicConfigDef, ...] = (
    TopicConfigDef("cleanup.policy", _T.LIST, "delete, compact, or both (compact,delete).",
                   _syn("log.cleanup.policy"), _CLEANUP_POLICIES),
    TopicConfigDef("compression.type", _T.STRING, "The compression of stored records.",
                   _syn("compression.type"), _COMPRESSION_TYPES),
    TopicConfigDef("delete.retention.ms", _T.LONG, "How long tombstones are kept when compacting.",
                   _syn("log.cleaner.delete.retention.ms"), at_least(0)),
    TopicConfigDef("file.delete.delay.ms", _T.LONG, "How long a deleted segment's files stay on disk.",
                   _syn("log.segment.delete.delay.ms"), at_least(0)),
    TopicConfigDef("flush.messages", _T.LONG, "Messages appended before the log is flushed.",
                   _syn("log.flush.interval.messages"), at_least(1)),
    TopicConfigDef("flush.ms", _T.LONG, "Time a message may stay unflushed.", _FLUSH_MS, at_least(0)),
    TopicConfigDef("index.interval.bytes", _T.INT, "Bytes of log between two offset index entries.",
                   _syn("log.index.interval.bytes"), at_least(0)),
    TopicConfigDef("max.message.bytes", _T.INT, "The largest record batch accepted.",
                   _syn("message.max.bytes"), at_least(0)),
    TopicConfigDef("message.timestamp.type", _T.STRING, "CreateTime or LogAppendTime.",
                   _syn("log.message.timestamp.type"), _TIMESTAMP_TYPES),
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
                   _RETENTION, at_least(-1)),
    TopicConfigDef("segment.bytes", _T.INT, "The largest size of a log segment.",
                   _syn("log.segment.bytes"), at_least(14)),
    TopicConfigDef("segment.index.bytes", _T.INT, "The largest size of an offset index file.",
                   _syn("log.index.size.max.bytes"), at_least(4)),
    TopicConfigDef("segment.ms", _T.LONG, "The time after which a new segment is rolled.",
                   _ROLL, at_least(1)),
    TopicConfigDef("segment.jitter.ms", _T.LONG, "The largest random jitter of the roll time.",
                   _ROLL_JITTER, at_least(0)),
    TopicConfigDef("unclean.leader.election.enable", _T.BOOLEAN, "Allow out-of-sync leaders.",
                   _syn("unclean.leader.election.enable")),
    TopicConfigDef("preallocate", _T.BOOLEAN, "Preallocate segment files.", _syn("log.preallocate")),
    TopicConfigDef("message.downconversion.enable", _T.BOOLEAN, "Convert records for old consumers.",
                   _syn("log.message.downconversion.enable")),
)

TOPIC_CONFIGS: Mapping[str, TopicConfigDef] = {d.name: d for d in _TOPIC_DEFS}


# --- properties files -------------------------------------------------------------------------------

_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a ``.properties`` file (UTF-8) into a dict; see ``parse_properties`` for the syntax."""
    with open(path, encoding="utf-8") as file:
        return parse_properties(file.read())


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``.properties`` text as java.util.Properties does; later keys win.

    Lines starting with ``#`` or ``!`` are comments. A key ends at the first unescaped ``=``, ``:`` or
    blank; one ``=`` or ``:`` and the blanks around it separate key from value. A line ending in an odd
    number of backslashes continues on the next line, whose leading blanks are dropped. Escapes
    (``\\t``, ``\\n``, ``\\uXXXX``, ``\\=`` ...) are resolved. Values are stripped of surrounding blanks,
    since Kafka ignores them anyway. Raises ConfigError for a malformed ``\\u`` escape.
    """
    entries: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_entry(line)
        entries[key] = value.strip()
    return entries


def _logical_lines(text: str) -> Iterator[str]:
    """Join continued lines and drop blank and comment lines."""
    pending: str | None = None
    for natural in re.split(r"\r\n|\r|\n", text):
        line = natural.lstrip(_BLANKS)
        # Only the first natural line of a logical line can be a comment or blank.
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def _split_entry(line: str) -> tuple[str, str]:
    """Split a logical line into an unescaped key and value."""
    end = 0
    while end < len(line) and line[end] not in "=:" + _BLANKS:
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    rest = line[end:].lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANKS)
    return _unescape(line[:end]), _unescape(rest)


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        index += 1
        if char != "\\" or index == len(text):
            # A lone trailing backslash can only remain from a continuation at the end of the file.
            out.append("" if char == "\\" else char)
            continue
        char = text[index]
        index += 1
        if char == "u":
            out.append(_unicode_escape(text[index : index + 4]))
            index += 4
        else:
            out.append(_ESCAPES.get(char, char))
    return "".join(out)


def _unicode_escape(digits: str) -> str:
    if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
        raise ConfigError(f"Malformed \\uxxxx encoding in properties: \\u{digits}")
    return chr(int(digits, 16))


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """Parse ``key=value`` flag values (``--override``); later ones win. Raises ConfigError."""
    overrides: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"Invalid override {item!r}: expected key=value")
        overrides[key.strip()] = value.strip()
    return overrides


# --- broker configuration ---------------------------------------------------------------------------

_Layers: TypeAlias = Mapping[ConfigSource, Mapping[str, ConfigValue]]

_DEFAULTS: Mapping[str, ConfigValue] = {
    name: None if d.default is None else d.parse(d.default) for name, d in BROKER_CONFIGS.items()
}


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """A config that supplies or could supply a value, as listed in DescribeConfigs."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntryView:
    """One entry of a DescribeConfigs response, independent of the protocol version."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    config_type: ConfigType
    documentation: str | None
    synonyms: tuple[ConfigSynonym, ...]


def _known(name: str) -> ConfigDef:
    try:
        return BROKER_CONFIGS[name]
    except KeyError:
        raise KeyError(f"Unknown broker configuration {name}") from None


def _parse_static(props: Mapping[str, str]) -> tuple[dict[str, ConfigValue], dict[str, str]]:
    """Parse known static configs; warn about and keep unknown ones."""
    known: dict[str, ConfigValue] = {}
    unknown: dict[str, str] = {}
    for name, raw in props.items():
        if name in BROKER_CONFIGS:
            known[name] = BROKER_CONFIGS[name].parse(raw)
        else:
            # Kafka warns rather than fails, so files written for newer or other brokers still load.
            logger.warning("The configuration '%s' was supplied but isn't a known config.", name)
            unknown[name] = raw
    return known, unknown


def _parse_dynamic(name: str, raw: str | None) -> ConfigValue:
    """Check that ``name`` may change at runtime, then parse ``raw``."""
    definition = BROKER_CONFIGS.get(name)
    if definition is None:
        raise ConfigError(f"Unknown broker configuration {name}", name)
    if not definition.dynamic:
        raise ConfigError(f"Cannot update configuration {name} dynamically: it is read-only", name)
    return None if raw is None else definition.parse(raw)


def validate_dynamic_broker_configs(configs: Mapping[str, str | None]) -> None:
    """Raise ConfigError unless every name is a dynamic broker config and every value is valid.

    A None value (deleting a dynamic value) is accepted for dynamic configs.
    """
    for name, raw in configs.items():
        _parse_dynamic(name, raw)


class BrokerConfig:
    """An immutable broker configuration: defaults, static settings and dynamic layers.

    Build one with ``BrokerConfig()`` (all defaults), ``from_properties`` or ``load``. Values are read with
    the typed properties (``node_id``, ``listeners``, ...) or the ``get_*`` accessors; ``with_dynamic``
    returns a copy with runtime changes applied.
    """

    __slots__ = ("_layers", "_unknown")

    _layers: _Layers
    _unknown: Mapping[str, str]

    def __init__(self, static: Mapping[str, str] | None = None) -> None:
        """Build from static settings (file and flags already merged); raise ConfigError if invalid."""
        known, unknown = _parse_static(static or {})
        self._layers = {ConfigSource.STATIC_BROKER_CONFIG: known}
        self._unknown = unknown
        self._check_consistency()

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Build from a dict of raw strings with Kafka's names."""
        return cls(props)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """Build from an optional properties file and ``key=value`` overrides, which win over the file."""
        props = load_properties(path) if path is not None else {}
        props.update(parse_overrides(overrides))
        return cls(props)

    @classmethod
    def _from_layers(cls, layers: _Layers, unknown: Mapping[str, str]) -> BrokerConfig:
        config = cls.__new__(cls)
        config._layers = layers
        config._unknown = unknown
        config._check_consistency()
        return config

    def _check_consistency(self) -> None:
        """Rules spanning several configs, which single-value validators cannot see."""
        protocols = self.listener_security_protocol_map
        controllers = set(self.controller_listener_names)
        names = {listener.name for listener in self.listeners}
        unmapped = sorted(names - protocols.keys() - controllers)
        if unmapped:
            raise ConfigError(
                f"Listener {unmapped[0]} has no security protocol in listener.security.protocol.map",
                "listener.security.protocol.map",
            )
        inter_broker = self.inter_broker_listener_name
        if inter_broker is not None and inter_broker not in names - controllers:
            raise ConfigError(f"inter.broker.listener.name {inter_broker} is not one of the non-controller listeners",
                              "inter.broker.listener.name")
        for listener in self.advertised_listeners:
            if listener.name not in names:
                raise ConfigError(f"Advertised listener {listener.name} is not one of the listeners",
                                  "advertised.listeners")

    # -- generic access ---------------------------------------------------------------------------------

    def resolve(self, name: str) -> tuple[ConfigValue, ConfigSource]:
        """The effective value of a known config and where it comes from. Raises KeyError if unknown."""
        _known(name)
        for source in _BROKER_LAYERS:
            layer = self._layers.get(source, {})
            if name in layer:
                return layer[name], source
        return _DEFAULTS[name], ConfigSource.DEFAULT_CONFIG

    def value(self, name: str) -> ConfigValue:
        """The effective parsed value of a known config (None if it has none)."""
        return self.resolve(name)[0]

    def source(self, name: str) -> ConfigSource:
        return self.resolve(name)[1]

    def get_int(self, name: str) -> int:
        """An INT, SHORT or LONG config; raises TypeError for other types or when it has no value."""
        value = self.get_optional_int(name)
        if value is None:
            raise TypeError(f"Configuration {name} has no value")
        return value

    def get_optional_int(self, name: str) -> int | None:
        value = self._typed(name, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG)
        assert value is None or isinstance(value, int)
        return value

    def get_float(self, name: str) -> float:
        value = self._typed(name, ConfigType.DOUBLE)
        assert isinstance(value, float)
        return value

    def get_bool(self, name: str) -> bool:
        value = self._typed(name, ConfigType.BOOLEAN)
        assert isinstance(value, bool)
        return value

    def get_str(self, name: str) -> str | None:
        """A STRING, CLASS or PASSWORD config."""
        value = self._typed(name, ConfigType.STRING, ConfigType.CLASS, ConfigType.PASSWORD)
        assert value is None or isinstance(value, str)
        return value

    def get_list(self, name: str) -> list[str]:
        """A LIST config; an unset list is empty."""
        value = self._typed(name, ConfigType.LIST)
        assert value is None or isinstance(value, tuple)
        return list(value or ())

    def _typed(self, name: str, *types: ConfigType) -> ConfigValue:
        definition = _known(name)
        if definition.type not in types:
            raise TypeError(f"Configuration {name} is of type {definition.type.name}")
        return self.value(name)

    @property
    def unknown(self) -> Mapping[str, str]:
        """Configs that were supplied but are not known, kept as given."""
        return dict(self._unknown)

    def dump(self) -> dict[str, str | None]:
        """Every effective value as a string, including unknown configs, sorted by name; passwords hidden."""
        values: dict[str, str | None] = dict(self._unknown)
        for name, definition in BROKER_CONFIGS.items():
            value = _format(self.value(name))
            values[name] = "[hidden]" if definition.sensitive and value is not None else value
        return dict(sorted(values.items()))

    def __repr__(self) -> str:
        explicit = {name: _format(value) for layer in self._layers.values() for name, value in layer.items()}
        return f"BrokerConfig({explicit!r})"

    # -- dynamic configs --------------------------------------------------------------------------------

    def with_dynamic(self, updates: Mapping[str, str | None], *, per_broker: bool = False) -> BrokerConfig:
        """A copy with dynamic values set (None removes one) in the cluster-wide or per-broker layer.

        Raises ConfigError for unknown or read-only names and invalid values; ``self`` is unchanged.
        """
        source = ConfigSource.DYNAMIC_BROKER_CONFIG if per_broker else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        layer = dict(self._layers.get(source, {}))
        for name, raw in updates.items():
            value = _parse_dynamic(name, raw)
            if raw is None:
                layer.pop(name, None)
            else:
                layer[name] = value
        return BrokerConfig._from_layers({**self._layers, source: layer}, self._unknown)

    def dynamic_configs(self, *, per_broker: bool = False) -> dict[str, str]:
        """The dynamic values of one layer as strings, e.g. to persist them."""
        source = ConfigSource.DYNAMIC_BROKER_CONFIG if per_broker else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        return {name: _format(value) or "" for name, value in self._layers.get(source, {}).items()}

    # -- synonyms ---------------------------------------------------------------------------------------

    def synonyms(self, name: str) -> list[ConfigSynonym]:
        """Every value ``name`` has, highest precedence first: dynamic, static, then the default."""
        definition = _known(name)
        found: list[tuple[ConfigValue, ConfigSource]] = [
            (self._layers[source][name], source)
            for source in _BROKER_LAYERS
            if name in self._layers.get(source, {})
        ]
        if _DEFAULTS[name] is not None:
            found.append((_DEFAULTS[name], ConfigSource.DEFAULT_CONFIG))
        return [
            ConfigSynonym(name, None if definition.sensitive else _format(value), source)
            for value, source in found
        ]

    def resolve_synonyms(self, synonyms: Iterable[Synonym]) -> tuple[ConfigValue, ConfigSource]:
        """The value of the first synonym that has one, converted to milliseconds where it has a unit.

        This is how ``log.retention.ms`` wins over ``log.retention.minutes`` over ``log.retention.hours``.
        A negative time means no limit and is reported as -1.
        """
        for synonym in synonyms:
            value, source = self.resolve(synonym.name)
            if value is not None:
                return _scale(value, synonym.unit_ms), source
        return None, ConfigSource.DEFAULT_CONFIG

    # -- typed properties -------------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def process_roles(self) -> list[str]:
        return self.get_list("process.roles")

    @property
    def cluster_id(self) -> str | None:
        return self.get_str("cluster.id")

    @property
    def broker_rack(self) -> str | None:
        return self.get_str("broker.rack")

    @property
    def listeners(self) -> list[Listener]:
        return [parse_listener(item) for item in self.get_list("listeners")]

    @property
    def advertised_listeners(self) -> list[Listener]:
        """The advertised listeners, or the listeners when ``advertised.listeners`` is not set."""
        if self.value("advertised.listeners") is None:
            return self.listeners
        return [parse_listener(item) for item in self.get_list("advertised.listeners")]

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        return _parse_protocol_map(self.get_list("listener.security.protocol.map"))

    @property
    def inter_broker_listener_name(self) -> str | None:
        value = self.value("inter.broker.listener.name")
        return str(value).upper() if value else None

    @property
    def controller_listener_names(self) -> list[str]:
        return [name.upper() for name in self.get_list("controller.listener.names")]

    def security_protocol(self, listener_name: str) -> str:
        """The security protocol of a listener; unmapped (controller) listeners use PLAINTEXT."""
        protocols = self.listener_security_protocol_map
        return protocols.get(listener_name.upper(), "PLAINTEXT")

    @property
    def controller_quorum_voters(self) -> list[Voter]:
        return [parse_voter(item) for item in self.get_list("controller.quorum.voters")]

    @property
    def socket_request_max_bytes(self) -> int:
        return self.get_int("socket.request.max.bytes")

    @property
    def queued_max_requests(self) -> int:
        return self.get_int("queued.max.requests")

    @property
    def num_partitions(self) -> int:
        return self.get_int("num.partitions")

    @property
    def default_replication_factor(self) -> int:
        return self.get_int("default.replication.factor")

    @property
    def auto_create_topics_enable(self) -> bool:
        return self.get_bool("auto.create.topics.enable")

    @property
    def auto_create_topics(self) -> bool:
        """Short name for ``auto_create_topics_enable``."""
        return self.auto_create_topics_enable

    @property
    def delete_topic_enable(self) -> bool:
        return self.get_bool("delete.topic.enable")

    @property
    def log_dirs(self) -> list[str]:
        """``log.dirs`` if set, else ``[log.dir]``."""
        if self.value("log.dirs") is not None:
            return self.get_list("log.dirs")
        return [self.get_str("log.dir") or ""]

    @property
    def log_retention_ms(self) -> int:
        """Resolved from log.retention.ms, .minutes, .hours (first set wins); -1 means no limit."""
        return _as_int(self.resolve_synonyms(_RETENTION)[0])

    @property
    def log_retention_bytes(self) -> int:
        return self.get_int("log.retention.bytes")

    @property
    def log_segment_bytes(self) -> int:
        return self.get_int("log.segment.bytes")

    @property
    def log_roll_ms(self) -> int:
        """Resolved from log.roll.ms and log.roll.hours."""
        return _as_int(self.resolve_synonyms(_ROLL)[0])

    @property
    def log_retention_check_interval_ms(self) -> int:
        return self.get_int("log.retention.check.interval.ms")

    @property
    def log_cleanup_policy(self) -> list[str]:
        return self.get_list("log.cleanup.policy")

    @property
    def message_max_bytes(self) -> int:
        return self.get_int("message.max.bytes")

    @property
    def min_insync_replicas(self) -> int:
        return self.get_int("min.insync.replicas")

    @property
    def unclean_leader_election_enable(self) -> bool:
        return self.get_bool("unclean.leader.election.enable")

    @property
    def offsets_topic_num_partitions(self) -> int:
        return self.get_int("offsets.topic.num.partitions")

    @property
    def offsets_topic_replication_factor(self) -> int:
        return self.get_int("offsets.topic.replication.factor")

    @property
    def offsets_retention_ms(self) -> int:
        return self.get_int("offsets.retention.minutes") * 60_000

    @property
    def group_initial_rebalance_delay_ms(self) -> int:
        return self.get_int("group.initial.rebalance.delay.ms")

    @property
    def group_min_session_timeout_ms(self) -> int:
        return self.get_int("group.min.session.timeout.ms")

    @property
    def group_max_session_timeout_ms(self) -> int:
        return self.get_int("group.max.session.timeout.ms")

    @property
    def transactional_id_expiration_ms(self) -> int:
        return self.get_int("transactional.id.expiration.ms")

    @property
    def transaction_max_timeout_ms(self) -> int:
        return self.get_int("transaction.max.timeout.ms")

    @property
    def producer_id_expiration_ms(self) -> int:
        return self.get_int("producer.id.expiration.ms")


def _scale(value: ConfigValue, unit_ms: int) -> ConfigValue:
    if unit_ms == 1:
        return value
    millis = _as_int(value) * unit_ms
    # Kafka treats any negative time as unlimited (-1); cap to a Java long like Kafka's arithmetic would.
    return -1 if millis < 0 else min(millis, LONG_MAX)


def _as_int(value: ConfigValue) -> int:
    assert isinstance(value, int) and not isinstance(value, bool), value
    return value


def _as_float(value: ConfigValue) -> float:
    assert isinstance(value, int | float) and not isinstance(value, bool), value
    return float(value)


# --- describing configs -----------------------------------------------------------------------------


def _group_of(name: str) -> tuple[Synonym, ...]:
    """The synonyms that can supply ``name``'s effect, from ``name`` itself down in precedence."""
    for group in (_RETENTION, _ROLL, _ROLL_JITTER, _FLUSH_MS):
        names = [synonym.name for synonym in group]
        if name in names:
            return group[names.index(name) :]
    return (Synonym(name),)


def _broker_synonyms(broker: BrokerConfig, synonyms: Iterable[Synonym]) -> list[ConfigSynonym]:
    return [entry for synonym in synonyms for entry in broker.synonyms(synonym.name)]


def describe_broker_configs(broker: BrokerConfig) -> list[ConfigEntryView]:
    """Every known broker config as DescribeConfigs reports it, sorted by name; passwords are hidden."""
    return [_broker_entry(broker, definition) for _, definition in sorted(BROKER_CONFIGS.items())]


def _broker_entry(broker: BrokerConfig, definition: ConfigDef) -> ConfigEntryView:
    value, source = broker.resolve(definition.name)
    return ConfigEntryView(
        name=definition.name,
        value=None if definition.sensitive else _format(value),
        source=source,
        read_only=not definition.dynamic,
        sensitive=definition.sensitive,
        config_type=definition.type,
        documentation=definition.doc,
        synonyms=tuple(_broker_synonyms(broker, _group_of(definition.name))),
    )


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """Raise ConfigError for an unknown topic config, a missing (None) value or an invalid value."""
    for name, raw in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"Unknown topic config name: {name}", name)
        if raw is None:
            raise ConfigError(f"Null value not supported for topic configs: {name}", name)
        definition.parse(raw)


def effective_topic_configs(broker: BrokerConfig, overrides: Mapping[str, str]) -> list[ConfigEntryView]:
    """Every topic config with its effective value, as DescribeConfigs reports it, sorted by name.

    A topic override has source DYNAMIC_TOPIC_CONFIG; otherwise the value and source come from the
    broker config that supplies the default. Synonyms list the override, then the broker configs' values
    in precedence order, then the default. Raises ConfigError if ``overrides`` are invalid.
    """
    validate_topic_configs(overrides)
    return [_topic_entry(broker, definition, overrides) for _, definition in sorted(TOPIC_CONFIGS.items())]


def _topic_value(
    broker: BrokerConfig, definition: TopicConfigDef, overrides: Mapping[str, str]
) -> tuple[ConfigValue, ConfigSource]:
    raw = overrides.get(definition.name)
    if raw is not None:
        return definition.parse(raw), ConfigSource.DYNAMIC_TOPIC_CONFIG
    return broker.resolve_synonyms(definition.synonyms)


def _topic_entry(
    broker: BrokerConfig, definition: TopicConfigDef, overrides: Mapping[str, str]
) -> ConfigEntryView:
    value, source = _topic_value(broker, definition, overrides)
    synonyms = _broker_synonyms(broker, definition.synonyms)
    if source is ConfigSource.DYNAMIC_TOPIC_CONFIG:
        synonyms.insert(0, ConfigSynonym(definition.name, _format(value), source))
    return ConfigEntryView(
        name=definition.name,
        value=_format(value),
        source=source,
        read_only=False,
        sensitive=False,
        config_type=definition.type,
        documentation=definition.doc,
        synonyms=tuple(synonyms),
    )


def log_config(broker: BrokerConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The storage settings of a partition: topic overrides over broker defaults. Raises ConfigError."""
    validate_topic_configs(overrides)

    def get(name: str) -> ConfigValue:
        return _topic_value(broker, TOPIC_CONFIGS[name], overrides)[0]

    def get_int(name: str) -> int:
        return _as_int(get(name))

    policy = get("cleanup.policy")
    assert isinstance(policy, tuple)
    return LogConfig(
        segment_bytes=get_int("segment.bytes"),
        segment_ms=get_int("segment.ms"),
        retention_ms=get_int("retention.ms"),
        retention_bytes=get_int("retention.bytes"),
        index_interval_bytes=get_int("index.interval.bytes"),
        segment_index_bytes=get_int("segment.index.bytes"),
        flush_messages=get_int("flush.messages"),
        flush_ms=get_int("flush.ms"),
        max_message_bytes=get_int("max.message.bytes"),
        message_timestamp_type=TimestampType(get("message.timestamp.type")),
        message_timestamp_before_max_ms=get_int("message.timestamp.before.max.ms"),
        message_timestamp_after_max_ms=get_int("message.timestamp.after.max.ms"),
        cleanup_policy=policy,
        file_delete_delay_ms=get_int("file.delete.delay.ms"),
        delete_retention_ms=get_int("delete.retention.ms"),
        min_cleanable_dirty_ratio=_as_float(get("min.cleanable.dirty.ratio")),
        min_compaction_lag_ms=get_int("min.compaction.lag.ms"),
        max_compaction_lag_ms=get_int("max.compaction.lag.ms"),
        min_insync_replicas=get_int("min.insync.replicas"),
        unclean_leader_election_enable=bool(get("unclean.leader.election.enable")),
    )
