"""DescribeTopicPartitions (key 75): topics and their partitions, a page at a time (KIP-966).

The admin client's successor to Metadata for describing topics: it pages through large topics instead of
answering every partition at once. Topics are answered in name order, from the request's cursor (a topic and
the partition to start at) on, until `response_partition_limit` partitions (at most the broker's
`max.request.partition.size.limit`) have been answered; `next_cursor` then says where the next page starts,
and is null when nothing is left. An empty topic list means every topic the principal may DESCRIBE.

Authorization is Metadata's: a topic named without DESCRIBE is answered with TOPIC_AUTHORIZATION_FAILED, and a
listing of every topic leaves those out. A cursor naming a topic that is not among those requested is an
INVALID_REQUEST for every topic, as in Kafka. Moldau has no eligible leader replicas (KIP-966's ELR is not
implemented), so `eligible_leader_replicas` and `last_known_elr` are always empty.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from moldau.metadata.image import PartitionImage, TopicImage
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import AUTHORIZED_OPERATIONS_OMITTED, NO_THROTTLE

_NO_TOPIC_ID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class _Page:
    """What one response carries: (topic name, topic or None when unknown, first partition) and the cursor."""

    topics: list[tuple[str, TopicImage | None, int, int]]  # name, topic, first partition, partition count
    next_cursor: tuple[str, int] | None


async def handle(ctx: RequestContext, request: Any) -> Any:
    names = _names(ctx, request)
    cursor = request.cursor
    if cursor is not None and request.topics and cursor.topic_name not in names:
        topics = tuple(_missing(ctx, n, ErrorCode.invalid_request) for n in names)
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, topics=topics, next_cursor=None)
    limit = max(1, min(request.response_partition_limit, ctx.broker.config.max_request_partition_size_limit))
    page = paginate(ctx.broker.image.topics_by_name, names, cursor, limit)
    topics = tuple(_topic(ctx, name, topic, first, count) for name, topic, first, count in page.topics)
    next_cursor = None if page.next_cursor is None else make(
        ctx.nested("Cursor"), topic_name=page.next_cursor[0], partition_index=page.next_cursor[1])
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, topics=topics, next_cursor=next_cursor)


def _names(ctx: RequestContext, request: Any) -> list[str]:
    """The topics asked for, in name order: those named, or every topic the principal may describe."""
    if request.topics:
        return sorted({t.name for t in request.topics})
    return sorted(name for name in ctx.broker.image.topics_by_name
                  if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name))


def paginate(topics: Any, names: list[str], cursor: Any, limit: int) -> _Page:
    """The topics from the cursor on that fit in `limit` partitions, and where the next page starts.

    Pure (no I/O): `topics` maps names to TopicImage. A topic that does not exist takes no partitions.
    """
    start_name, start_partition = (cursor.topic_name, max(0, cursor.partition_index)) if cursor else ("", 0)
    out: list[tuple[str, TopicImage | None, int, int]] = []
    remaining = limit
    wanted = [n for n in names if n >= start_name]
    for i, name in enumerate(wanted):
        topic = topics.get(name)
        first = start_partition if name == start_name else 0
        total = len(topic.partitions) if topic is not None else 0
        if remaining == 0:
            return _Page(out, (name, first))
        count = min(max(0, total - first), remaining)
        out.append((name, topic, first, count))
        remaining -= count
        if first + count < total:
            return _Page(out, (name, first + count))
        if remaining == 0 and i + 1 < len(wanted):
            return _Page(out, (wanted[i + 1], 0))
    return _Page(out, None)


def _topic(ctx: RequestContext, name: str, topic: TopicImage | None, first: int, count: int) -> Any:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _missing(ctx, name, ErrorCode.topic_authorization_failed)
    if topic is None:
        return _missing(ctx, name, ErrorCode.unknown_topic_or_partition)
    partitions = sorted(topic.partitions.values(), key=lambda p: p.partition)[first:first + count]
    return make(ctx.nested("DescribeTopicPartitionsResponseTopic"), error_code=ErrorCode.none, name=name,
                topic_id=topic.topic_id, is_internal=topic.is_internal,
                partitions=tuple(_partition(ctx, p) for p in partitions),
                topic_authorized_operations=_operations(ctx, name))


def _operations(ctx: RequestContext, name: str) -> int:
    """The request has no flag for them: Kafka always answers a topic's authorized operations (KIP-430)."""
    operations = ctx.authorized_operations(ResourceType.TOPIC, name)
    return AUTHORIZED_OPERATIONS_OMITTED if operations is None else operations


def _partition(ctx: RequestContext, p: PartitionImage) -> Any:
    image = ctx.broker.image
    return make(ctx.nested("DescribeTopicPartitionsResponsePartition"),
                error_code=ErrorCode.none if p.leader >= 0 else ErrorCode.leader_not_available,
                partition_index=p.partition, leader_id=p.leader, leader_epoch=p.leader_epoch,
                replica_nodes=p.replicas, isr_nodes=p.isr, eligible_leader_replicas=(), last_known_elr=(),
                offline_replicas=tuple(r for r in p.replicas if not image.replica_online(r, p)))


def _missing(ctx: RequestContext, name: str, code: ErrorCode) -> Any:
    return make(ctx.nested("DescribeTopicPartitionsResponseTopic"), error_code=code, name=name,
                topic_id=_NO_TOPIC_ID, is_internal=False, partitions=(),
                topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


API = Api(key=75, name="DescribeTopicPartitions", min_version=0, max_version=0, handle=handle)
