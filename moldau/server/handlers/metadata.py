"""Metadata (key 3): brokers, controller, and topics with their partitions, leaders and replicas.

Topics are looked up by name, or by id from v10. A topic that does not exist is created here when both the
request (v4+) and the broker (`auto.create.topics.enable`) allow it, with the broker's defaults; creation goes
through the active controller and is awaited, so the response already carries the new topic's partitions. In v0
an empty topic list means all topics; from v1 that is a null list.

Only unfenced brokers are listed, as in KRaft. A partition whose leader is fenced or gone has leader -1 and
LEADER_NOT_AVAILABLE, and its replicas on fenced brokers are listed as offline, so clients wait and refresh.
"""

from __future__ import annotations

import uuid
from typing import Any

from moldau.metadata.controller import validate_topic_name
from moldau.metadata.image import MetadataImage, TopicImage
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import AUTHORIZED_OPERATIONS_OMITTED, NO_THROTTLE

_NO_TOPIC_ID = uuid.UUID(int=0)


_FIRST_NULLABLE_RESPONSE_NAME_VERSION = 12


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    wanted = request.topics
    if wanted is None or (ctx.version == 0 and not wanted):
        image = broker.image
        topics = [_topic(ctx, t, ErrorCode.none) for t in image.topics_by_name.values()]
    else:
        allow_create = getattr(request, "allow_auto_topic_creation", True) and broker.config.auto_create_topics
        topics = [await _requested_topic(ctx, t, allow_create) for t in wanted]
    image = broker.image
    return make(
        ctx.schema.response_type,
        throttle_time=NO_THROTTLE,
        brokers=_brokers(ctx, image),
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=tuple(topics),
        error_code=ErrorCode.none,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _brokers(ctx: RequestContext, image: MetadataImage) -> tuple[Any, ...]:
    cls = ctx.nested("MetadataResponseBroker")
    out = []
    for broker_id, registration in sorted(image.brokers.items()):
        if registration.fenced:
            continue
        endpoint = ctx.broker.endpoint_for(registration, ctx.listener)
        if endpoint is not None:
            out.append(make(cls, node_id=broker_id, host=endpoint.host, port=endpoint.port,
                            rack=registration.rack))
    return tuple(out)


async def _requested_topic(ctx: RequestContext, requested: Any, allow_create: bool) -> Any:
    image = ctx.broker.image
    name = requested.name
    topic_id = getattr(requested, "topic_id", None)
    if name is None:
        topic = image.topics_by_id.get(topic_id) if topic_id not in (None, _NO_TOPIC_ID) else None
        if topic is None:
            return _missing(ctx, None, topic_id, ErrorCode.unknown_topic_id)
        return _topic(ctx, topic, ErrorCode.none)
    topic = image.topics_by_name.get(name)
    if topic is not None:
        return _topic(ctx, topic, ErrorCode.none)
    try:
        validate_topic_name(name)
    except KafkaError as exc:
        return _missing(ctx, name, None, exc.code)
    if not allow_create:
        return _missing(ctx, name, None, ErrorCode.unknown_topic_or_partition)
    try:
        await ctx.broker.auto_create_topic(name)
    except KafkaError as exc:
        if exc.code != ErrorCode.topic_already_exists:
            return _missing(ctx, name, None, exc.code)
    topic = ctx.broker.image.topics_by_name.get(name)
    if topic is None:
        return _missing(ctx, name, None, ErrorCode.leader_not_available)
    return _topic(ctx, topic, ErrorCode.none)


def _missing(ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None, code: ErrorCode) -> Any:
    if name is None and ctx.version < _FIRST_NULLABLE_RESPONSE_NAME_VERSION:
        name = ""  # v10 and v11 look topics up by id but cannot answer a null name
    return make(ctx.nested("MetadataResponseTopic"), error_code=code, name=name,
                topic_id=topic_id or _NO_TOPIC_ID, is_internal=False, partitions=(),
                topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _topic(ctx: RequestContext, topic: TopicImage, code: ErrorCode) -> Any:
    part_cls = ctx.nested("MetadataResponsePartition")
    image = ctx.broker.image
    partitions = tuple(
        make(part_cls, error_code=ErrorCode.none if p.leader >= 0 else ErrorCode.leader_not_available,
             partition_index=p.partition, leader_id=p.leader, leader_epoch=p.leader_epoch,
             replica_nodes=p.replicas, isr_nodes=p.isr,
             offline_replicas=tuple(r for r in p.replicas if not image.is_live(r)))
        for p in sorted(topic.partitions.values(), key=lambda p: p.partition)
    )
    return make(ctx.nested("MetadataResponseTopic"), error_code=code, name=topic.name, topic_id=topic.topic_id,
                is_internal=topic.is_internal, partitions=partitions,
                topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


API = Api(key=3, name="Metadata", min_version=0, max_version=13, handle=handle)
