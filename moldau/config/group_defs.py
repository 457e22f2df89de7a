"""The group config table (ConfigResource type GROUP, 32): the configs one consumer or share group may override,
with Kafka's names (GroupConfig, KIP-848, KIP-932, KIP-1191), the broker config that supplies each default, and
the broker configs that bound it.

A value is checked twice: against its own type and validator (as Kafka's ConfigDef does), then against the
broker's `group.*.min.*` / `group.*.max.*` bounds; a session timeout must stay above the heartbeat interval
in effect. `validate_group_configs` raises ConfigError with a message naming the config and the bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from moldau.config.broker_config import BrokerConfig, ConfigSynonym
from moldau.config.describe import ConfigEntryView
from moldau.config.offset_reset import AUTO_OFFSET_RESET
from moldau.config.schema import (
    ConfigError,
    ConfigSource,
    ConfigType,
    ConfigValue,
    Custom,
    OneOf,
    Validator,
    _parse_checked,
    at_least,
    format_value,
)

_T = ConfigType

def _check_dead_letter_topic(value: ConfigValue) -> str | None:
    if isinstance(value, str) and value.startswith("__"):
        return "the dead-letter topic's name must not start with '__' (internal topics)"
    return None


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    """One group config: its default is the broker config `synonym` (else `default`); `bounds` names the broker
    configs holding its least and greatest allowed values."""

    name: str
    type: ConfigType
    doc: str
    synonym: str | None = None
    validator: Validator | None = None
    bounds: tuple[str, str] | None = None
    default: str | None = None


_GROUP_DEFS: tuple[GroupConfigDef, ...] = (
    GroupConfigDef("consumer.session.timeout.ms", _T.INT,
                   "How long a member of this consumer (KIP-848) group may go without a heartbeat.",
                   "group.consumer.session.timeout.ms", at_least(1),
                   ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms")),
    GroupConfigDef("consumer.heartbeat.interval.ms", _T.INT,
                   "How often members of this consumer (KIP-848) group are asked to heartbeat.",
                   "group.consumer.heartbeat.interval.ms", at_least(1),
                   ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms")),
    GroupConfigDef("share.session.timeout.ms", _T.INT,
                   "How long a member of this share group may go without a heartbeat.",
                   "group.share.session.timeout.ms", at_least(1),
                   ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms")),
    GroupConfigDef("share.heartbeat.interval.ms", _T.INT,
                   "How often members of this share group are asked to heartbeat.",
                   "group.share.heartbeat.interval.ms", at_least(1),
                   ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms")),
    GroupConfigDef("share.record.lock.duration.ms", _T.INT,
                   "How long a record handed to a member of this share group stays locked to it.",
                   "group.share.record.lock.duration.ms", at_least(1000),
                   ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms")),
    GroupConfigDef("share.delivery.count.limit", _T.INT,
                   "How many times this share group may deliver a record before it is archived.",
                   "group.share.delivery.count.limit", at_least(2),
                   ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit")),
    GroupConfigDef("share.partition.max.record.locks", _T.INT,
                   "The most records of one share-partition of this group in flight at once.",
                   "group.share.partition.max.record.locks", at_least(100),
                   ("group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks")),
    GroupConfigDef("share.auto.offset.reset", _T.STRING,
                   "Where this share group starts on a partition it has never consumed: latest, earliest, or "
                   "by_duration:<ISO-8601 duration> (the first record at most that long ago).",
                   "share.auto.offset.reset", AUTO_OFFSET_RESET),
    GroupConfigDef("share.isolation.level", _T.STRING,
                   "read_committed: deliver only records of committed transactions; read_uncommitted: every "
                   "record.", None, OneOf(("read_committed", "read_uncommitted")), default="read_uncommitted"),
    GroupConfigDef("errors.deadletterqueue.topic.name", _T.STRING,
                   "The topic records this share group gives up on (rejected, or out of deliveries) are written "
                   "to; empty for none.", None, Custom(_check_dead_letter_topic, "a topic name not starting "
                                                       "with '__'"), default=""),
    GroupConfigDef("errors.deadletterqueue.copy.record.enable", _T.BOOLEAN,
                   "Whether a dead-letter record carries the original key, value and headers, or only the "
                   "headers naming where it came from.", None, default="false"),
)

GROUP_CONFIGS: Mapping[str, GroupConfigDef] = {d.name: d for d in _GROUP_DEFS}
# The session timeout each heartbeat interval must stay below.
_SESSION_OF = {"consumer.heartbeat.interval.ms": "consumer.session.timeout.ms",
               "share.heartbeat.interval.ms": "share.session.timeout.ms"}


def _parse(definition: GroupConfigDef, raw: str) -> ConfigValue:
    return _parse_checked(definition.name, definition.type, definition.validator, raw)


def validate_group_configs(configs: Mapping[str, str | None], broker: BrokerConfig) -> None:
    """Raise ConfigError for an unknown group config, a missing value, an invalid one or one out of the broker's
    bounds."""
    for name, raw in configs.items():
        definition = GROUP_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"Unknown group config name: {name}", name)
        if raw is None:
            raise ConfigError(f"Null value not supported for group configs: {name}", name)
        value = _parse(definition, raw)
        if definition.bounds is not None and isinstance(value, int):
            low_name, high_name = definition.bounds
            low, high = broker.get_int(low_name), broker.get_int(high_name)
            if not low <= value <= high:
                raise ConfigError(f"Invalid value {raw.strip()} for configuration {name}: must be in the range "
                                  f"{low} ({low_name}) to {high} ({high_name}) inclusive", name)
    for interval_name, session_name in _SESSION_OF.items():
        interval, session = (_effective_int(configs, broker, n) for n in (interval_name, session_name))
        if (interval_name in configs or session_name in configs) and session <= interval:
            raise ConfigError(f"{session_name} ({session}) must be greater than {interval_name} ({interval})",
                              session_name)


def _effective_int(configs: Mapping[str, str | None], broker: BrokerConfig, name: str) -> int:
    raw = configs.get(name)
    if raw is not None:
        return int(raw.strip())
    synonym = GROUP_CONFIGS[name].synonym
    assert synonym is not None
    return broker.get_int(synonym)


def describe_group_configs(broker: BrokerConfig, overrides: Mapping[str, str]) -> list[ConfigEntryView]:
    """Every group config with its value for a group with these overrides, sorted by name: the override (source
    GROUP_CONFIG), else the broker config that supplies it, else the default."""
    return [_entry(broker, d, overrides) for _, d in sorted(GROUP_CONFIGS.items())]


def _entry(broker: BrokerConfig, definition: GroupConfigDef, overrides: Mapping[str, str]) -> ConfigEntryView:
    synonyms = [] if definition.synonym is None else list(broker.synonyms(definition.synonym))
    raw = overrides.get(definition.name)
    if raw is not None:
        value: str | None = format_value(_parse(definition, raw))
        source = ConfigSource.GROUP_CONFIG
        synonyms.insert(0, ConfigSynonym(definition.name, value, source))
    elif definition.synonym is not None:
        resolved, source = broker.resolve(definition.synonym)
        value = format_value(resolved)
    else:
        value, source = definition.default, ConfigSource.DEFAULT_CONFIG
    return ConfigEntryView(name=definition.name, value=value, source=source, read_only=False, sensitive=False,
                           config_type=definition.type, documentation=definition.doc, synonyms=tuple(synonyms))
