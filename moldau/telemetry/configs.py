"""CLIENT_METRICS config resources (KIP-714) as DescribeConfigs and IncrementalAlterConfigs see them.

Kept apart from the topic and broker configs: a subscription's configs are Kafka's ClientMetricsConfigs, not
broker configs, and are validated by `moldau.telemetry.subscriptions`.
"""

from __future__ import annotations

from collections.abc import Mapping

from moldau.config import ConfigError
from moldau.config.describe import ConfigEntryView
from moldau.config.schema import ConfigSource, ConfigType
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.telemetry.subscriptions import CONFIG_DEFS, RESOURCE_CLIENT_METRICS, parse

__all__ = ["RESOURCE_CLIENT_METRICS", "check_client_metrics_configs", "client_metrics_entries"]


def client_metrics_entries(values: Mapping[str, str]) -> list[ConfigEntryView]:
    """Every config of a subscription: those set (CLIENT_METRICS_CONFIG), the others at their defaults."""
    set_source, default_source = ConfigSource.CLIENT_METRICS_CONFIG, ConfigSource.DEFAULT_CONFIG
    return [ConfigEntryView(name=name, value=values.get(name, default),
                            source=set_source if name in values else default_source, read_only=False,
                            sensitive=False, config_type=ConfigType(type_number), documentation=doc, synonyms=())
            for name, type_number, default, doc in CONFIG_DEFS]


def check_client_metrics_configs(name: str, configs: Mapping[str, str]) -> None:
    """Raise INVALID_CONFIG unless these are a valid subscription's configs."""
    try:
        parse(name, configs)
    except ConfigError as exc:
        raise KafkaError(ErrorCode.invalid_config, str(exc)) from exc
