"""Writing a share group to `__consumer_offsets` (record type 11, ShareGroupMetadata), for the handlers that
create, change or delete share groups.

Membership stays in memory (`moldau.share`); what is written is that the group exists, its epoch, and the topics
it may have share-partition state of (its members' subscriptions and the topics an administrator set offsets of,
less those whose offsets were deleted), so after a restart of its coordinator the group is still listed,
described (empty), deletable, its id not taken by a classic or consumer group, and DescribeShareGroupOffsets
without topics still finds its topics. The write is made before the answer, and waits for the in-sync replicas,
as Kafka's coordinator records do.
"""

from __future__ import annotations

from collections.abc import Iterable

from moldau.coordinator.group.records import ShareGroupValue
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext


def written_topics(ctx: RequestContext, group_id: str) -> tuple[str, ...]:
    """The topics last written for the share group (none if it was never written)."""
    written = ctx.broker.groups.coordinator.share_group(group_id)
    return () if written is None else written.topics


async def write_group(ctx: RequestContext, group_id: str, add: Iterable[str] = (),
                      remove: Iterable[str] = ()) -> ErrorCode:
    """Write the share group if its epoch moved or its topics grew by its members' subscriptions or `add`, or
    shrink by `remove` or by topics deleted from the cluster (ErrorCode.none when there is nothing to write)."""
    group = ctx.broker.share.groups.get(group_id)
    if group is None:
        return ErrorCode.none
    written = ctx.broker.groups.coordinator.share_group(group_id)
    topics = set(() if written is None else written.topics) | group.subscribed_topics() | set(add)
    existing = ctx.broker.image.topics_by_name
    value = ShareGroupValue(group.epoch, tuple(sorted(t for t in topics - set(remove) if t in existing)))
    if value == written:
        return ErrorCode.none
    return await ctx.broker.groups.write_share_group(group_id, value)


async def write_deletion(ctx: RequestContext, group_id: str) -> ErrorCode:
    """Write the share group's deletion (a tombstone), if it was ever written."""
    if ctx.broker.groups.coordinator.share_group(group_id) is None:
        return ErrorCode.none
    return await ctx.broker.groups.write_share_group(group_id, None)
