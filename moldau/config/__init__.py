"""Broker and topic configuration, named, typed and validated as in Apache Kafka.

Static broker settings come from a Kafka-style ``server.properties`` file and ``--override key=value``
flags: flags win over the file, the file over built-in defaults. Dynamic settings (IncrementalAlterConfigs)
are layered on top, a per-broker value over a cluster-wide default. Topic configs have their own table;
a topic without an override takes its value from the broker config Kafka documents as its "server default
property" (``retention.ms`` from ``log.retention.ms|minutes|hours``, and so on).

Modules (import from ``moldau.config``; the names below are re-exported here):

- ``schema``: what a config is. Types, parsing of raw strings and Kafka's wording for invalid values,
  validators (``Range``, ``OneOf``, ``ListOf``, ``Custom``), and the records ``ConfigDef`` and
  ``TopicConfigDef`` the tables are made of.
- ``addresses``: listeners (``NAME://host:port``), quorum voters (``id@host:port``), the listener security
  protocol map.
- ``broker_defs``: the broker config table, ``BROKER_CONFIGS`` (pure data).
- ``topic_defs``: the topic config table, ``TOPIC_CONFIGS`` (pure data), and the broker configs that supply
  each topic default.
- ``properties``: ``.properties`` files and ``--override`` flags.
- ``broker_config``: ``BrokerConfig``, the layered configuration with a typed property per config read.
- ``describe``: DescribeConfigs views (``describe_broker_configs``, ``effective_topic_configs``), topic
  config validation and resolution, and ``NOT_YET_ACTED_ON``.
- ``settings``: the ``Settings`` convention. A subsystem's settings dataclass has ``from_config(config) ->
  Self`` (``FetcherSettings``, ``TxnSettings``, ``CoordinatorSettings``, ``ConnectionLimits``,
  ``ReceiveBudget``, the metadata quorum's ``raft.Config``, and ``LogConfig``, which also takes a topic's
  overrides); the broker builds every subsystem's settings that way.

Adding a config
---------------
A broker config is one ``ConfigDef`` entry in ``broker_defs``; a topic config is one ``TopicConfigDef`` entry
in ``topic_defs`` naming the broker configs that supply its default (a broker default is itself a broker
config, whose ``topic_config`` names the topic config; a test checks the two agree). That entry alone makes the config
accepted in files, flags and AlterConfigs, validated, reported by DescribeConfigs, and documented: run
``python -m moldau.config_doc > docs/configuration.md`` to regenerate the doc (a test fails while it is stale).
Mark a config that is accepted but has no effect yet with ``acted_on=False``. To act on a broker config,
read it through a typed property of ``BrokerConfig`` named like it (``replica_fetch_backoff_ms =
_Int("replica.fetch.backoff.ms")``) and add it to the subsystem's settings class and its ``from_config``.
"""

from moldau.config.addresses import Listener, Voter, parse_listener, parse_voter
from moldau.config.broker_config import BrokerConfig, ConfigSynonym, validate_dynamic_broker_configs
from moldau.config.broker_defs import BROKER_CONFIGS, dynamic_broker_config_names
from moldau.config.describe import (
    NOT_YET_ACTED_ON,
    ConfigEntryView,
    describe_broker_configs,
    effective_topic_configs,
    validate_topic_configs,
)
from moldau.config.properties import load_properties, parse_overrides, parse_properties
from moldau.config.schema import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    ConfigValue,
    Custom,
    ListOf,
    OneOf,
    Range,
    Synonym,
    TopicConfigDef,
    Validator,
)
from moldau.config.settings import Settings
from moldau.config.topic_defs import TOPIC_CONFIGS
from moldau.storage.log_config import LogConfig

# A partition's storage settings (topic overrides over broker defaults), under the name importers know.
log_config = LogConfig.from_config

__all__ = [
    "BROKER_CONFIGS",
    "LONG_MAX",
    "NOT_YET_ACTED_ON",
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
    "Settings",
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
