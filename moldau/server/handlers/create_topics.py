"""CreateTopics (key 19): create topics with a partition count and replication factor, or explicit replicas.

Each topic succeeds or fails on its own. A count or factor of -1 takes the broker's default
(`num.partitions`, `default.replication.factor`; KIP-464). Assignments give each partition's replicas
instead; their partition indexes must run 0, 1, ... without gaps (INVALID_REPLICA_ASSIGNMENT), and they
cannot be combined with a count or factor (INVALID_REQUEST). Configs become the topic's dynamic overrides; a
null value, an unknown name or a bad value is INVALID_CONFIG. A topic named twice in one request fails with
INVALID_REQUEST for each entry and is not created. Other errors: TOPIC_ALREADY_EXISTS,
INVALID_TOPIC_EXCEPTION for an illegal name (or one colliding with an existing one in '.' versus '_'),
INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR. A request that would create more than 10,000 partitions in all
fails whole, every topic with POLICY_VIOLATION, as Kafka's controller answers it.

`validate_only` checks everything and creates nothing, but answers as if it had. From v5 a successful result
carries the partition count, replication factor and the topic's effective configs with their sources
(KIP-525), and from v7 the new topic's id (KIP-516). Creation is committed synchronously, so the request's
timeout never expires.

With a `controller_mutation_rate` quota on the client, each topic's partitions count against it (not with
`validate_only`); from v6 a topic over the quota is refused with THROTTLING_QUOTA_EXCEEDED, before v6 it is
created and the client throttled (KIP-599; see `moldau.server.handlers.mutations`).

With an authorizer, each topic needs CREATE on the cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED);
refused topics are answered by the node that received the request and the others forwarded. The configs of a
created topic are returned only with DESCRIBE_CONFIGS on it.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import replace
from typing import Any

from moldau.metadata.controller import MAX_PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS, CreatedTopic
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, forward_authorized
from moldau.server.handlers.describe_configs import topic_config_entries
from moldau.server.handlers.mutations import Mutations, mutation_quota, serve_metered

_NO_TOPIC_ID = uuid.UUID(int=0)
_FIRST_STRICT_VERSION = 6  # KIP-599: THROTTLING_QUOTA_EXCEEDED per topic from here, throttling only before


async def handle(ctx: RequestContext, request: Any) -> Any:
    quota = None if request.validate_only else mutation_quota(ctx, _FIRST_STRICT_VERSION)
    if quota is None:
        return await _handle(ctx, request)
    may_create_any = ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
    return await serve_metered(ctx, request, quota, Mutations(
        "topics", "topics", key=lambda t: t.name, refusal=lambda t: _refusal(ctx, t, may_create_any),
        count=lambda t: _partition_count(ctx, t),
        duplicate=lambda t: _error(ctx, t.name, ErrorCode.invalid_request, _named_twice(t.name)),
        throttled=lambda t, message: _error(ctx, t.name, ErrorCode.throttling_quota_exceeded, message),
        serve=_handle))


def _partition_count(ctx: RequestContext, topic: Any) -> int:
    """The partitions creating `topic` makes: its assignments, its count, or the broker's default count."""
    if topic.assignments:
        return len(topic.assignments)
    return int(topic.num_partitions) if topic.num_partitions != -1 else ctx.broker.config.num_partitions


def _too_many_partitions(ctx: RequestContext, topics: list[Any]) -> bool:
    """More partitions than one request may create, counting what each topic asks for (as Kafka counts: a count
    below -1 or 0 adds nothing; the topic fails on its own)."""
    return sum(max(0, _partition_count(ctx, t)) for t in topics) > MAX_PARTITIONS_PER_REQUEST


def _named_twice(name: str) -> str:
    return f"topic '{name}' is named more than once in the request"


def _refusal(ctx: RequestContext, topic: Any, may_create_any: bool) -> Any | None:
    """TOPIC_AUTHORIZATION_FAILED for a topic the principal may not create (CREATE on the cluster or on it)."""
    if may_create_any or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, topic.name):
        return None
    return _error(ctx, topic.name, ErrorCode.topic_authorization_failed, f"{ctx.principal} may not create {topic.name}")


async def _handle(ctx: RequestContext, request: Any) -> Any:
    may_create_any = ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
    refusals = {i: refusal for i, t in enumerate(request.topics)
                if (refusal := _refusal(ctx, t, may_create_any)) is not None}
    forwarded = await forward_authorized(ctx, request, "topics", "topics", refusals)
    if forwarded is not None:
        return _hide_configs(ctx, forwarded)
    counts = Counter(t.name for t in request.topics)
    if _too_many_partitions(ctx, [t for i, t in enumerate(request.topics) if i not in refusals]):
        topics = tuple(refusals.get(i) or _error(ctx, t.name, ErrorCode.policy_violation, TOO_MANY_PARTITIONS)
                       for i, t in enumerate(request.topics))
        return _hide_configs(ctx, make(ctx.schema.response_type, throttle_time=NO_THROTTLE, topics=topics))
    topics = tuple([
        refusals[i] if i in refusals else
        _error(ctx, t.name, ErrorCode.invalid_request, _named_twice(t.name))
        if counts[t.name] > 1 else await _create(ctx, t, request.validate_only)
        for i, t in enumerate(request.topics)
    ])
    return _hide_configs(ctx, make(ctx.schema.response_type, throttle_time=NO_THROTTLE, topics=topics))


def _hide_configs(ctx: RequestContext, response: Any) -> Any:
    """v5+: a created topic's configs only for a principal that may DESCRIBE_CONFIGS it; for others none, with
    TOPIC_AUTHORIZATION_FAILED as the configs' error code, as Kafka answers."""
    if ctx.version < 5 or ctx.authorizer is None:
        return response
    topics = tuple(
        t if t.error_code != ErrorCode.none or ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                                                             t.name)
        else replace(t, configs=(), topic_config_error_code=ErrorCode.topic_authorization_failed.value)
        for t in response.topics
    )
    return replace(response, topics=topics)


async def _create(ctx: RequestContext, topic: Any, validate_only: bool) -> Any:
    try:
        configs = _configs(topic)
        created = await ctx.broker.controller.create_topic(topic.name, topic.num_partitions,
                                                           topic.replication_factor, _assignments(topic), configs,
                                                           validate_only)
    except KafkaError as exc:
        return _error(ctx, topic.name, exc.code, exc.message)
    return _created(ctx, topic.name, created)


def _configs(topic: Any) -> dict[str, str]:
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        raise KafkaError(ErrorCode.invalid_config, f"null value not supported for topic configs: {', '.join(nulls)}")
    return {c.name: c.value for c in topic.configs}


def _assignments(topic: Any) -> dict[int, list[int]]:
    assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
    # Partition indexes are positions, so they must be exactly 0..n-1, each once.
    if sorted(a.partition_index for a in topic.assignments) != list(range(len(topic.assignments))):
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         "assigned partitions must be the consecutive indexes 0, 1, ... each given once")
    return assignments


def _created(ctx: RequestContext, name: str, created: CreatedTopic) -> Any:
    configs: tuple[Any, ...] = ()
    if ctx.version >= 5:
        config_cls = ctx.nested("CreatableTopicConfigs")
        configs = tuple(
            make(config_cls, name=e.name, value=e.value, read_only=e.read_only, config_source=int(e.source),
                 is_sensitive=e.sensitive)
            for e in topic_config_entries(ctx, created.configs)
        )
    return make(ctx.nested("CreatableTopicResult"), name=name, topic_id=created.topic_id,
                error_code=ErrorCode.none, error_message=None, topic_config_error_code=0,
                num_partitions=created.num_partitions, replication_factor=created.replication_factor,
                configs=configs)


def _error(ctx: RequestContext, name: str, code: ErrorCode, message: str) -> Any:
    return make(ctx.nested("CreatableTopicResult"), name=name, topic_id=_NO_TOPIC_ID, error_code=code,
                error_message=message, topic_config_error_code=0, num_partitions=-1,
                replication_factor=-1, configs=())


API = Api(key=19, name="CreateTopics", min_version=2, max_version=7, handle=handle)
