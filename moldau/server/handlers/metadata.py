"""Metadata (key 3): brokers, controller, and topics with their partitions, leaders and replicas.

Topics are looked up by name, or by id from v10. A topic that does not exist is created here when both the
request (v4+) and the broker (`auto.create.topics.enable`) allow it, with the broker's defaults; creation goes
through the active controller and is awaited, so the response already carries the new topic's partitions. In v0
an empty topic list means all topics; from v1 that is a null list.

Only unfenced brokers are listed, as in KRaft. The controller named is this broker, which forwards admin requests
to the active controller; while it is not listed itself (fenced, shutting down) another listed broker is named, as
clients send admin requests only to a controller they find among the brokers. A partition whose leader is fenced
or gone has leader -1 and LEADER_NOT_AVAILABLE, and its replicas on fenced brokers are listed as offline, so
clients wait and refresh.

With an authorizer, a listing of all topics leaves out those the principal may not DESCRIBE; a topic asked for
by name or id without DESCRIBE (or to be auto-created without CREATE on the cluster or the topic) is answered
with TOPIC_AUTHORIZATION_FAILED. Authorized operations (KIP-430) are answered from the ACLs when asked for.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from moldau.metadata.controller import validate_topic_name
from moldau.metadata.image import MetadataImage, TopicImage
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.metadata_response import (
    MetadataBroker,
    MetadataPartition,
    MetadataResponse,
    MetadataTopic,
    encode_metadata_topic,
)
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import AUTHORIZED_OPERATIONS_OMITTED, requested_operations

_NO_TOPIC_ID = uuid.UUID(int=0)


_FIRST_NULLABLE_RESPONSE_NAME_VERSION = 12


async def handle(ctx: RequestContext, request: Any) -> MetadataResponse:
    broker = ctx.broker
    wanted = request.topics
    if wanted is None or (ctx.version == 0 and not wanted):
        image = broker.image
        topics = [_topic(ctx, t, ErrorCode.none, request) for t in image.topics_by_name.values()
                  if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)]
    else:
        allow_create = getattr(request, "allow_auto_topic_creation", True) and broker.config.auto_create_topics
        topics = [await _requested_topic(ctx, request, t, allow_create) for t in wanted]
    image = broker.image
    brokers = _brokers(ctx, image)
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=_controller_id(broker.node_id, brokers),
        topics=topics,
        cluster_authorized_operations=requested_operations(ctx, request, "include_cluster_authorized_operations",
                                                           ResourceType.CLUSTER, CLUSTER_NAME),
    )


def _controller_id(node_id: int, brokers: list[MetadataBroker]) -> int:
    """The broker named as controller, to which clients send admin requests: this one, which forwards them to the
    active controller, as long as it is listed; else (fenced, shutting down) another listed broker, since a client
    waits for the controller to appear among the brokers before sending such a request; -1 when none is listed."""
    if any(b.node_id == node_id for b in brokers):
        return node_id
    return brokers[0].node_id if brokers else -1


def _brokers(ctx: RequestContext, image: MetadataImage) -> list[MetadataBroker]:
    out = []
    for broker_id, registration in sorted(image.brokers.items()):
        if registration.fenced:
            continue
        endpoint = ctx.broker.endpoint_for(registration, ctx.listener)
        if endpoint is not None:
            out.append(MetadataBroker(broker_id, endpoint.host, endpoint.port, registration.rack))
    return out


async def _requested_topic(ctx: RequestContext, request: Any, requested: Any,
                           allow_create: bool) -> MetadataTopic:
    image = ctx.broker.image
    name = requested.name
    topic_id = getattr(requested, "topic_id", None)
    if name is None:
        topic = image.topics_by_id.get(topic_id) if topic_id not in (None, _NO_TOPIC_ID) else None
        if topic is None:
            return _missing(ctx, None, topic_id, ErrorCode.unknown_topic_id)
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
            return _missing(ctx, None, topic_id, ErrorCode.topic_authorization_failed)
        return _topic(ctx, topic, ErrorCode.none, request)
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _missing(ctx, name, None, ErrorCode.topic_authorization_failed)
    topic = image.topics_by_name.get(name)
    if topic is not None:
        return _topic(ctx, topic, ErrorCode.none, request)
    try:
        validate_topic_name(name)
    except KafkaError as exc:
        return _missing(ctx, name, None, exc.code)
    if not allow_create:
        return _missing(ctx, name, None, ErrorCode.unknown_topic_or_partition)
    if not (ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
            or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)):
        return _missing(ctx, name, None, ErrorCode.topic_authorization_failed)
    try:
        await ctx.broker.auto_create_topic(name)
    except KafkaError as exc:
        if exc.code != ErrorCode.topic_already_exists:
            return _missing(ctx, name, None, exc.code)
    topic = ctx.broker.image.topics_by_name.get(name)
    if topic is None:
        return _missing(ctx, name, None, ErrorCode.leader_not_available)
    return _topic(ctx, topic, ErrorCode.none, request)


def _missing(ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None, code: ErrorCode) -> MetadataTopic:
    if name is None and ctx.version < _FIRST_NULLABLE_RESPONSE_NAME_VERSION:
        name = ""  # v10 and v11 look topics up by id but cannot answer a null name
    return MetadataTopic(code, name, topic_id or _NO_TOPIC_ID, False, (), AUTHORIZED_OPERATIONS_OMITTED)


# A topic's encoded answer, per (topic id, version), with the topic image and broker registrations it was made
# from: both are immutable and replaced when they change, so while they are the same objects the bytes still hold.
# A Metadata of all topics then costs O(changed topics) of encoding, not O(partitions).
_ENCODED: dict[tuple[uuid.UUID, int], tuple[TopicImage, Mapping[int, Any], bytes]] = {}


def _topic(ctx: RequestContext, topic: TopicImage, code: ErrorCode, request: Any) -> MetadataTopic:
    image = ctx.broker.image
    operations = requested_operations(ctx, request, "include_topic_authorized_operations", ResourceType.TOPIC,
                                      topic.name)
    cacheable = code == ErrorCode.none and operations == AUTHORIZED_OPERATIONS_OMITTED
    key = (topic.topic_id, ctx.version)
    if cacheable:
        cached = _ENCODED.get(key)
        if cached is not None and cached[0] is topic and cached[1] is image.brokers:
            return MetadataTopic(code, topic.name, topic.topic_id, topic.is_internal, (), operations, cached[2])
    online = image.replica_online
    partitions = [
        MetadataPartition(ErrorCode.none if p.leader >= 0 else ErrorCode.leader_not_available, p.partition,
                          p.leader, p.leader_epoch, p.replicas, p.isr,
                          tuple([r for r in p.replicas if not online(r, p)]))
        for p in sorted(topic.partitions.values(), key=lambda p: p.partition)
    ]
    answer = MetadataTopic(code, topic.name, topic.topic_id, topic.is_internal, partitions, operations)
    if cacheable:
        if len(_ENCODED) > 2 * len(image.topics_by_id) + 64:
            _ENCODED.clear()  # deleted topics' entries, or versions no client asks for any more
        answer.encoded = encode_metadata_topic(ctx.version, answer)
        _ENCODED[key] = (topic, image.brokers, answer.encoded)
    return answer


API = Api(key=3, name="Metadata", min_version=0, max_version=13, handle=handle)
