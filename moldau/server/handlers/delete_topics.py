"""DeleteTopics (key 20): delete topics with all their partitions and data.

Up to v5 topics are named; from v6 each entry names a topic or gives its id (KIP-516), and an entry with
both or neither is INVALID_REQUEST. A missing topic is UNKNOWN_TOPIC_OR_PARTITION by name and
UNKNOWN_TOPIC_ID by id. When the broker has `delete.topic.enable=false`, Kafka answers
TOPIC_DELETION_DISABLED from v3 and INVALID_REQUEST before, because older clients do not know that code.
A name or id given twice in one request fails with INVALID_REQUEST for each of its entries.

Internal topics (names starting with `__`, such as `__consumer_offsets`) are refused with INVALID_REQUEST:
Kafka leaves this protection to its command-line tools, but deleting them through the API silently loses
every group's committed offsets, so this broker refuses it for every client.

Deletion is a metadata change committed synchronously; the logs go when the replica manager applies it, so
the request's timeout never expires.

With a `controller_mutation_rate` quota on the client, each deleted topic's partitions count against it; from v5
a topic over the quota is refused with THROTTLING_QUOTA_EXCEEDED, before v5 it is deleted and the client
throttled (KIP-599; see `moldau.server.handlers.mutations`).

With an authorizer, each topic needs DELETE (else TOPIC_AUTHORIZATION_FAILED, answered by the node that received
the request; the others are forwarded).
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from moldau.metadata.image import TopicImage
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, forward_authorized
from moldau.server.handlers.mutations import Mutations, mutation_quota, serve_metered

_NO_TOPIC_ID = uuid.UUID(int=0)
_FIRST_VERSION_WITH_DELETION_DISABLED = 3
_FIRST_STRICT_VERSION = 5  # KIP-599: THROTTLING_QUOTA_EXCEEDED per topic from here, throttling only before
_NAMED_TWICE = "duplicate topic in request"


async def handle(ctx: RequestContext, request: Any) -> Any:
    quota = mutation_quota(ctx, _FIRST_STRICT_VERSION)
    if quota is None:
        return await _handle(ctx, request)
    if ctx.version < 6:
        return await serve_metered(ctx, request, quota, Mutations(
            "topic_names", "responses", key=lambda name: name, refusal=lambda name: _refusal(ctx, name, None),
            count=lambda name: _partition_count(ctx, name, None),
            duplicate=lambda name: _result(ctx, name, None, ErrorCode.invalid_request, _NAMED_TWICE),
            throttled=lambda name, message: _result(ctx, name, None, ErrorCode.throttling_quota_exceeded, message),
            serve=_handle))
    return await serve_metered(ctx, request, quota, Mutations(
        "topics", "responses", key=lambda t: _topic_id(t.topic_id) or t.name,
        refusal=lambda t: _refusal(ctx, t.name, _topic_id(t.topic_id)),
        count=lambda t: _partition_count(ctx, t.name, _topic_id(t.topic_id)),
        duplicate=lambda t: _result(ctx, t.name, _topic_id(t.topic_id), ErrorCode.invalid_request, _NAMED_TWICE),
        throttled=lambda t, message: _result(ctx, t.name, _topic_id(t.topic_id), ErrorCode.throttling_quota_exceeded,
                                             message),
        serve=_handle))


def _partition_count(ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None) -> int:
    """The partitions deleting the topic removes (0 for one this node does not know)."""
    image = ctx.broker.image
    topic = image.topics_by_id.get(topic_id) if topic_id is not None else (
        image.topics_by_name.get(name) if name is not None else None)
    return len(topic.partitions) if topic is not None else 0


async def _handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.version < 6:
        wanted: list[tuple[str | None, uuid.UUID | None]] = [(name, None) for name in request.topic_names]
    else:
        wanted = [(t.name, _topic_id(t.topic_id)) for t in request.topics]
    refusals = {i: refusal for i, (name, topic_id) in enumerate(wanted)
                if (refusal := _refusal(ctx, name, topic_id)) is not None}
    forwarded = await forward_authorized(ctx, request, "topic_names" if ctx.version < 6 else "topics",
                                         "responses", refusals)
    if forwarded is not None:
        return forwarded
    # Kafka refuses every entry of a name or id given twice rather than guessing which one was meant.
    counts = Counter(topic_id or name for name, topic_id in wanted)
    results = tuple([
        refusals[i] if i in refusals else
        _result(ctx, name, topic_id, ErrorCode.invalid_request, _NAMED_TWICE)
        if counts[topic_id or name] > 1 else await _delete(ctx, name, topic_id)
        for i, (name, topic_id) in enumerate(wanted)
    ])
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, responses=results)


def _refusal(ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None) -> Any | None:
    """TOPIC_AUTHORIZATION_FAILED for a topic the principal may not DELETE (by id: one it may not DESCRIBE
    either is UNKNOWN_TOPIC_ID, so ids cannot be probed)."""
    if topic_id is not None:
        topic = ctx.broker.image.topics_by_id.get(topic_id)
        if topic is None:
            return None
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
            return _result(ctx, None, topic_id, ErrorCode.unknown_topic_id, f"no topic has id {topic_id}")
        name = topic.name
    if name is None or ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
        return None
    return _result(ctx, name, topic_id, ErrorCode.topic_authorization_failed, f"{ctx.principal} may not delete {name}")


def _topic_id(value: uuid.UUID | None) -> uuid.UUID | None:
    # The zero UUID is the wire's "no id".
    return None if value is None or value == _NO_TOPIC_ID else value


async def _delete(ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None) -> Any:
    try:
        _check_deletion_enabled(ctx)
        topic = _find(ctx, name, topic_id)
        if topic.is_internal:
            raise KafkaError(ErrorCode.invalid_request, f"'{topic.name}' is an internal topic and cannot be deleted")
        await ctx.broker.controller.delete_topic(topic)
    except KafkaError as exc:
        return _result(ctx, name, topic_id, exc.code, exc.message)
    return _result(ctx, topic.name, topic.topic_id, ErrorCode.none, None)


def _find(ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None) -> TopicImage:
    image = ctx.broker.image
    if name is not None and topic_id is not None:
        raise KafkaError(ErrorCode.invalid_request, "give a topic name or a topic id, not both")
    if topic_id is not None:
        topic = image.topics_by_id.get(topic_id)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_id, f"no topic has id {topic_id}")
        return topic
    if name is None:
        raise KafkaError(ErrorCode.invalid_request, "give a topic name or a topic id")
    topic = image.topics_by_name.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
    return topic


def _check_deletion_enabled(ctx: RequestContext) -> None:
    # Checked first, as in Kafka: with deletion disabled every entry fails alike, existing or not.
    if not ctx.broker.config.delete_topic_enable:
        code = (ErrorCode.topic_deletion_disabled if ctx.version >= _FIRST_VERSION_WITH_DELETION_DISABLED
                else ErrorCode.invalid_request)
        raise KafkaError(code, "topic deletion is disabled (delete.topic.enable=false)")


def _result(ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None, code: ErrorCode,
            message: str | None) -> Any:
    return make(ctx.nested("DeletableTopicResult"), name=name, topic_id=topic_id or _NO_TOPIC_ID,
                error_code=code, error_message=message)


API = Api(key=20, name="DeleteTopics", min_version=1, max_version=6, handle=handle)
