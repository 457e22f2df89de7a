"""DescribeConfigs (key 32): the effective configs of topics, brokers and groups, with where each value comes from.

Resources are topics (type 2), brokers (type 4), client metrics subscriptions (type 16) and groups (type 32).
A topic lists every topic config: its own override (source DYNAMIC_TOPIC_CONFIG) or else the value of the broker
config that supplies the default. A broker named by its id lists every broker config, read-only unless it can be
changed at runtime; the broker named "" lists only the cluster-wide dynamic defaults, as in Kafka. Broker
resources describe the broker that answers, so Kafka clients send them to that broker; another id is
INVALID_REQUEST. A client metrics subscription (KIP-714) lists `metrics`, `interval.ms` and `match`: set ones with
source CLIENT_METRICS_CONFIG, the others at their defaults. A group lists every group config
(`moldau.config.group_defs`): its own value (source GROUP_CONFIG) or the broker config's. A missing topic is
UNKNOWN_TOPIC_OR_PARTITION, an illegal topic name INVALID_TOPIC_EXCEPTION, any other resource type
INVALID_REQUEST. Each resource fails on its own.

`configuration_keys` limits the answer to those names (null or empty: all). Synonyms (v1+, when asked for)
list every value that could supply the config, highest precedence first, e.g. a topic's `retention.ms`
override, then `log.retention.ms`, `log.retention.minutes`, `log.retention.hours` and the default.
Documentation (v3+) is sent only when asked for. Sensitive values are never sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from moldau.config import BrokerConfig, ConfigEntryView, ConfigError, describe_broker_configs, effective_topic_configs
from moldau.config.group_defs import describe_group_configs
from moldau.metadata.controller import validate_topic_name
from moldau.metadata.records import RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation
from moldau.security.acl.rules import config_refusal
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE
from moldau.telemetry.configs import RESOURCE_CLIENT_METRICS, client_metrics_entries


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = tuple(_describe(ctx, request, resource) for resource in request.resources)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, results=results)


def effective_broker_config(ctx: RequestContext, *, per_broker: bool = True) -> BrokerConfig:
    """The static config with the dynamic layers from the metadata image: cluster defaults, then this broker's."""
    image = ctx.broker.image
    config = ctx.broker.config.with_dynamic(dict(image.broker_configs()))
    if per_broker:
        config = config.with_dynamic(dict(image.broker_configs(ctx.broker.node_id)), per_broker=True)
    return config


def topic_config_entries(ctx: RequestContext, overrides: Mapping[str, str]) -> list[ConfigEntryView]:
    """Every config of a topic with these overrides, as this broker would apply them."""
    return effective_topic_configs(effective_broker_config(ctx), overrides)


def _describe(ctx: RequestContext, request: Any, resource: Any) -> Any:
    refusal = config_refusal(ctx, resource.resource_type, resource.resource_name, AclOperation.DESCRIBE_CONFIGS)
    if refusal is not None:
        return _result(ctx, resource, refusal, f"{ctx.principal} may not describe these configs", ())
    try:
        entries = _entries(ctx, resource.resource_type, resource.resource_name)
    except KafkaError as exc:
        return _result(ctx, resource, exc.code, exc.message, ())
    except ConfigError as exc:
        return _result(ctx, resource, ErrorCode.invalid_config, str(exc), ())
    keys = set(resource.configuration_keys or ())
    wanted = (e for e in entries if not keys or e.name in keys)
    configs = _configs(ctx, wanted, getattr(request, "include_synonyms", False),
                       getattr(request, "include_documentation", False))
    return _result(ctx, resource, ErrorCode.none, None, configs)


def _entries(ctx: RequestContext, resource_type: int, name: str) -> list[ConfigEntryView]:
    if resource_type == RESOURCE_TOPIC:
        validate_topic_name(name)
        if name not in ctx.broker.image.topics_by_name:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
        return topic_config_entries(ctx, ctx.broker.image.topic_configs(name))
    if resource_type == RESOURCE_BROKER:
        return _broker_entries(ctx, name)
    if resource_type == RESOURCE_CLIENT_METRICS:
        return client_metrics_entries(ctx.broker.image.configs.get((RESOURCE_CLIENT_METRICS, name), {}))
    if resource_type == RESOURCE_GROUP:
        return _group_entries(ctx, name)
    raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {resource_type}")


def _broker_entries(ctx: RequestContext, name: str) -> list[ConfigEntryView]:
    if name == "":
        defaults = ctx.broker.image.broker_configs()
        config = effective_broker_config(ctx, per_broker=False)
        return [e for e in describe_broker_configs(config) if e.name in defaults]
    node_id = ctx.broker.node_id
    if name != str(node_id):
        raise KafkaError(ErrorCode.invalid_request,
                         f"unexpected broker id {name!r}: this is broker {node_id}; send the request to that "
                         "broker or use the empty name for cluster-wide defaults")
    return describe_broker_configs(effective_broker_config(ctx))


def _group_entries(ctx: RequestContext, group_id: str) -> list[ConfigEntryView]:
    """Every group config: the group's own value, else the broker config that supplies it (a group need not
    exist to have configs, as in Kafka)."""
    if not group_id:
        raise KafkaError(ErrorCode.invalid_request, "a group config resource needs a group id")
    return describe_group_configs(effective_broker_config(ctx), ctx.broker.image.group_configs(group_id))


def _configs(ctx: RequestContext, entries: Iterable[ConfigEntryView], include_synonyms: bool,
             include_documentation: bool) -> tuple[Any, ...]:
    cls = ctx.nested("DescribeConfigsResourceResult")
    synonym_cls = ctx.nested("DescribeConfigsSynonym")
    return tuple(
        make(cls, name=e.name, value=e.value, read_only=e.read_only, config_source=int(e.source),
             is_sensitive=e.sensitive, config_type=int(e.config_type),
             documentation=e.documentation if include_documentation else None,
             synonyms=tuple(make(synonym_cls, name=s.name, value=s.value, source=int(s.source))
                            for s in e.synonyms) if include_synonyms else ())
        for e in entries
    )


def _result(ctx: RequestContext, resource: Any, code: ErrorCode, message: str | None,
            configs: tuple[Any, ...]) -> Any:
    return make(ctx.nested("DescribeConfigsResult"), error_code=code, error_message=message,
                resource_type=resource.resource_type, resource_name=resource.resource_name, configs=configs)


API = Api(key=32, name="DescribeConfigs", min_version=1, max_version=4, handle=handle)
