"""OffsetFetch (key 9): a group's committed offsets.

Up to v7 the request names one group; from v8 several. A null topic list (v2+) asks for every committed
partition. Partitions without a commit get offset -1 and empty metadata. A group-level error (e.g.
NOT_COORDINATOR) is the response's error from v2, and each partition's in v1. v10 names topics by id.

Offsets committed inside a transaction (TxnOffsetCommit) are not answered before the transaction commits.
With `require_stable` (v7+, what consumers with isolation.level=read_committed send), a partition with such a
pending commit answers UNSTABLE_OFFSET_COMMIT and offset -1, as in Kafka, and the client retries until the
transaction ends; without it, the last committed offset is answered as if no transaction were open.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from moldau.coordinator.group.offsets import NO_METADATA, NO_OFFSET, Fetched, FetchedValue
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE

MULTI_GROUP_FROM = 8
TOPIC_IDS_FROM = 10


async def handle(ctx: RequestContext, request: Any) -> Any:
    stable = bool(getattr(request, "require_stable", False))
    if ctx.version >= MULTI_GROUP_FROM:
        cls = ctx.nested("OffsetFetchResponseGroup")
        groups = []
        for g in request.groups:
            member = (getattr(g, "member_id", None), getattr(g, "member_epoch", -1))  # v9+: KIP-848 members
            error, topics = _fetch_group(ctx, g.group_id, g.topics, stable, *member)
            groups.append(make(cls, group_id=g.group_id, topics=topics, error_code=error))
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, groups=tuple(groups))
    error, topics = _fetch_group(ctx, request.group_id, request.topics, stable)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, topics=topics, error_code=error)


def _fetch_group(ctx: RequestContext, group_id: str, topics: Sequence[Any] | None, require_stable: bool,
                 member_id: str | None = None, member_epoch: int = -1) -> tuple[ErrorCode, tuple[Any, ...]]:
    names = None if topics is None else [_name(ctx, t) for t in topics]
    refused = {name for name in names or () if name is not None and not _describable(ctx, name)}
    requested = None if topics is None or names is None else [
        (name, tuple(t.partition_indexes)) for name, t in zip(names, topics, strict=True)
        if name is not None and name not in refused]
    if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        error, fetched = ctx.broker.groups.fetch_offsets(group_id, requested, member_id, member_epoch,
                                                         require_stable)
    else:
        error, fetched = ErrorCode.group_authorization_failed, []
    if error != ErrorCode.none:
        if ctx.version >= 2 or topics is None:
            return error, ()
        # v1 has no group-level error: every requested partition carries it.
        return ErrorCode.none, tuple(_topic(ctx, t.name, None, [(p, None) for p in t.partition_indexes], error)
                                     for t in topics)
    if topics is None or names is None:
        return ErrorCode.none, _all_topics(ctx, fetched)
    found = dict(fetched)
    out = []
    for name, t in zip(names, topics, strict=True):
        partitions: list[tuple[int, FetchedValue]] = found.get(name, []) \
            if name is not None and name not in refused else [(p, None) for p in t.partition_indexes]
        code = ErrorCode.none if name is not None else ErrorCode.unknown_topic_id
        if name in refused:
            code = ErrorCode.topic_authorization_failed
        out.append(_topic(ctx, getattr(t, "name", None), getattr(t, "topic_id", None), partitions, code))
    return ErrorCode.none, tuple(out)


def _describable(ctx: RequestContext, name: str) -> bool:
    return ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)


def _name(ctx: RequestContext, topic: Any) -> str | None:
    if ctx.version < TOPIC_IDS_FROM:
        return str(topic.name)
    found = ctx.broker.image.topics_by_id.get(topic.topic_id)
    return found.name if found is not None else None


def _all_topics(ctx: RequestContext, fetched: Fetched) -> tuple[Any, ...]:
    image = ctx.broker.image
    out = []
    for name, partitions in fetched:
        if not _describable(ctx, name):
            continue
        topic = image.topics_by_name.get(name)
        if ctx.version >= TOPIC_IDS_FROM and topic is None:
            continue  # committed for a topic that no longer exists: it has no id to report
        out.append(_topic(ctx, name, topic.topic_id if topic else None, partitions, ErrorCode.none))
    return tuple(out)


def _topic(ctx: RequestContext, name: str | None, topic_id: Any, partitions: list[tuple[int, FetchedValue]],
           error: ErrorCode) -> Any:
    many = ctx.version >= MULTI_GROUP_FROM
    part_cls = ctx.nested("OffsetFetchResponsePartitions" if many else "OffsetFetchResponsePartition")
    parts = tuple(_partition(part_cls, index, value, error) for index, value in partitions)
    return make(ctx.nested("OffsetFetchResponseTopics" if many else "OffsetFetchResponseTopic"),
                name=name, topic_id=topic_id, partitions=parts)


def _partition(cls: Any, index: int, value: FetchedValue, error: ErrorCode) -> Any:
    """A partition's answer: its committed offset, or none (-1) with the topic's error or its own."""
    if isinstance(value, ErrorCode):
        error, value = value, None
    return make(cls, partition_index=index, error_code=error,
                committed_offset=value.offset if value else NO_OFFSET,
                committed_leader_epoch=value.leader_epoch if value else -1,
                metadata=value.metadata if value else NO_METADATA)


API = Api(key=9, name="OffsetFetch", min_version=1, max_version=10, handle=handle)
