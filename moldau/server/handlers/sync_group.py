"""SyncGroup (key 14): the leader hands in the assignments; every member receives its own.

A follower's request waits until the leader's arrives (or the rebalance fails), so this handler awaits the
group runtime. From v5 the request names the protocol type and name, which must match the group's.
"""

from __future__ import annotations

from typing import Any

from moldau.coordinator.group.member import SyncRequest, SyncResult
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not request.group_id:
        return _response(ctx, SyncResult(ErrorCode.invalid_group_id))
    sync = SyncRequest(
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        generation_id=request.generation_id,
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
    )
    return _response(ctx, await ctx.broker.groups.sync(request.group_id, sync))


def _response(ctx: RequestContext, result: SyncResult) -> Any:
    ok = result.error == ErrorCode.none
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=result.error,
                protocol_type=result.protocol_type if ok else None,
                protocol_name=result.protocol_name if ok else None, assignment=result.assignment)


API = Api(key=14, name="SyncGroup", min_version=0, max_version=5, handle=handle)
