"""DeleteGroups (key 42): delete empty groups with their committed offsets.

A group with members gets NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND. Deletion writes tombstones for
the group and each of its offsets to `__consumer_offsets` before it is acknowledged. With an authorizer, each
group needs DELETE (else GROUP_AUTHORIZATION_FAILED). A share group (KIP-932) without members is deleted with its
durable share-partition state (DeleteShareGroupState to the share coordinators of every partition it may have
read) and its record in `__consumer_offsets` (a tombstone), so a share group created again under that id starts
afresh; if a coordinator cannot be reached the group stays and the answer is its error (COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR), to be retried.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE
from moldau.server.share_group_records import write_deletion


async def handle(ctx: RequestContext, request: Any) -> Any:
    names = list(request.groups_names)
    allowed = [ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, g) for g in names]
    deleted = iter(ctx.broker.groups.delete_groups([g for g, ok in zip(names, allowed, strict=True) if ok]))
    errors = [await _or_share_group(ctx, g, next(deleted)) if ok else ErrorCode.group_authorization_failed
              for g, ok in zip(names, allowed, strict=True)]
    cls = ctx.nested("DeletableGroupResult")
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE,
                results=tuple(make(cls, group_id=g, error_code=e) for g, e in zip(names, errors, strict=True)))


async def _or_share_group(ctx: RequestContext, group_id: str, error: ErrorCode) -> ErrorCode:
    """A group id unknown to the group coordinator may be a share group's (coordinated here as well)."""
    if error != ErrorCode.group_id_not_found:
        return error
    group = ctx.broker.share.describe(group_id)
    if group is None:
        return error
    if group.members:
        return ErrorCode.non_empty_group
    return await _delete_share_group(ctx, group_id)


async def _delete_share_group(ctx: RequestContext, group_id: str) -> ErrorCode:
    partitions = [(t.topic_id, p) for t in ctx.broker.image.topics_by_id.values() if not t.is_internal
                  for p in t.partitions]
    codes = await ctx.broker.share_state_links.delete_group_state(group_id, partitions)
    failed = next((c for c in codes.values() if c != ErrorCode.none), None)
    if failed is not None:
        return failed
    written = await write_deletion(ctx.broker, group_id)
    if written != ErrorCode.none:
        return written
    shared = ctx.broker.share.delete_group(group_id)
    return ErrorCode.group_id_not_found if shared is None else shared


API = Api(key=42, name="DeleteGroups", min_version=0, max_version=2, handle=handle)
