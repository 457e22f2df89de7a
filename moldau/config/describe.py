"""Views of the tables for the outside world: DescribeConfigs entries for a broker and a topic, topic config
validation and resolution (a topic override over its broker defaults), and the configs not acted on yet."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from moldau.config.broker_config import BrokerConfig, ConfigSynonym
from moldau.config.broker_defs import BROKER_CONFIGS
from moldau.config.schema import (
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    ConfigValue,
    Synonym,
    TopicConfigDef,
    format_value,
)
from moldau.config.topic_defs import FLUSH_MS, RETENTION, ROLL, ROLL_JITTER, TOPIC_CONFIGS

# Broker and topic configs accepted but not acted on yet (``acted_on=False`` in the tables): the broker warns
# when one is set.
NOT_YET_ACTED_ON: frozenset[str] = frozenset(
    {d.name for d in BROKER_CONFIGS.values() if not d.acted_on}
    | {d.name for d in TOPIC_CONFIGS.values() if not d.acted_on}
)


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


def _group_of(name: str) -> tuple[Synonym, ...]:
    """The synonyms that can supply ``name``'s effect, from ``name`` itself down in precedence."""
    for group in (RETENTION, ROLL, ROLL_JITTER, FLUSH_MS):
        names = [synonym.name for synonym in group]
        if name in names:
            return group[names.index(name) :]
    return (Synonym(name),)


def _broker_synonyms(broker: BrokerConfig, synonyms: Iterable[Synonym]) -> list[ConfigSynonym]:
    return [entry for synonym in synonyms for entry in broker.synonyms(synonym.name)]


def describe_broker_configs(broker: BrokerConfig) -> list[ConfigEntryView]:
    """Every known broker config as DescribeConfigs reports it, and the `listener.name.<listener>.` ones set
    dynamically, sorted by name; passwords are hidden."""
    entries = [_broker_entry(broker, definition) for _, definition in sorted(BROKER_CONFIGS.items())]
    for name, (value, source) in broker.dynamic_listener_configs().items():
        definition = BROKER_CONFIGS[name.split(".", 3)[3] if name.count(".") >= 3 else name]
        shown = None if definition.sensitive else format_value(value)
        entries.append(ConfigEntryView(name=name, value=shown, source=source, read_only=False,
                                       sensitive=definition.sensitive, config_type=definition.type,
                                       documentation=definition.doc,
                                       synonyms=(ConfigSynonym(name, shown, source),)))
    return sorted(entries, key=lambda entry: entry.name)


def _broker_entry(broker: BrokerConfig, definition: ConfigDef) -> ConfigEntryView:
    value, source = broker.resolve(definition.name)
    return ConfigEntryView(
        name=definition.name,
        value=None if definition.sensitive else format_value(value),
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


def topic_value(
    broker: BrokerConfig, definition: TopicConfigDef, overrides: Mapping[str, str]
) -> tuple[ConfigValue, ConfigSource]:
    """A topic config's effective value and its source: the topic's override, else its broker default, else the
    topic config's own default."""
    raw = overrides.get(definition.name)
    if raw is not None:
        return definition.parse(raw), ConfigSource.DYNAMIC_TOPIC_CONFIG
    value, source = broker.resolve_synonyms(definition.synonyms)
    if value is None and definition.default is not None:
        return definition.parse(definition.default), ConfigSource.DEFAULT_CONFIG
    return value, source


def _topic_entry(
    broker: BrokerConfig, definition: TopicConfigDef, overrides: Mapping[str, str]
) -> ConfigEntryView:
    value, source = topic_value(broker, definition, overrides)
    synonyms = _broker_synonyms(broker, definition.synonyms)
    if source is ConfigSource.DYNAMIC_TOPIC_CONFIG:
        synonyms.insert(0, ConfigSynonym(definition.name, format_value(value), source))
    return ConfigEntryView(
        name=definition.name,
        value=format_value(value),
        source=source,
        read_only=False,
        sensitive=False,
        config_type=definition.type,
        documentation=definition.doc,
        synonyms=tuple(synonyms),
    )

