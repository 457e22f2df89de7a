"""Writing a share group's existence to `__consumer_offsets` (record type 11, ShareGroupMetadata), for the
handlers that create, change or delete share groups.

Membership stays in memory (`moldau.share`); what is written is that the group exists and its epoch, so after a
restart of its coordinator the group is still listed, described (empty), deletable, and its id not taken by a
classic or consumer group. The write is made before the answer, and waits for the in-sync replicas, as Kafka's
coordinator records do.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext


async def write_epoch(ctx: RequestContext, group_id: str) -> ErrorCode:
    """Write the share group's epoch if it moved since the last write (ErrorCode.none when nothing to write)."""
    group = ctx.broker.share.groups.get(group_id)
    if group is None or group.epoch == ctx.broker.groups.coordinator.share_group_epoch(group_id):
        return ErrorCode.none
    return await ctx.broker.groups.write_share_group(group_id, group.epoch)


async def write_deletion(ctx: RequestContext, group_id: str) -> ErrorCode:
    """Write the share group's deletion (a tombstone), if it was ever written."""
    if ctx.broker.groups.coordinator.share_group_epoch(group_id) is None:
        return ErrorCode.none
    return await ctx.broker.groups.write_share_group(group_id, None)
